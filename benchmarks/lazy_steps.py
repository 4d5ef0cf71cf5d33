"""Where a lazy 16-sample training step of ``dynamic.py`` spends its time: recording the graph,
then executing it (``backward()``: the forward batches, the batched backward, freeing the
tape), then SGD.

Workloads: ``forest`` (Tree-LSTM, 16 trees per tape), ``lm_16`` (char LM, 16 separate
sequences per tape) and ``lm_batch`` (the same 16 sequences batched by hand); ``forest_fn`` and
``lm_16_fn`` are ``forest`` and ``lm_16`` with their cells as ``tape.function``s (one op per
cell call). The figures are
the minimum and median CPU time (``time.process_time``) over the steps, after three warm-up
steps. On a loaded machine these move by tens of percent; instructions do not: run
``--child`` (the steps only, no output) under ``valgrind --tool=callgrind`` for 2 and for 4
steps (with ``TAPE_AOT=0 NUMBA_CPU_NAME=generic``, as valgrind knows no AVX-512, after one
uncounted run that fills numba's disk cache) and halve the difference.

    .venv/bin/python benchmarks/lazy_steps.py [forest lm_16 lm_batch forest_fn lm_16_fn]
        [--steps N] [--batches]

``--batches`` first prints, per op type, how many ops each kernel call of one step ran (the
agenda's batch sizes: a forest step's cell ops in batches of one depth of 16 trees, an LM
step's in batches of 16).

With ``lm_batch`` and ``lm_16`` or ``lm_16_fn`` in one run, it ends with issue 12's LM ratio
by these minima (the hand batch's step over the 16 sequences' step), and the ratio the 16
sequences would reach if their execution cost no more than the hand batch's: what their
recording alone leaves possible.
"""
from __future__ import annotations

import argparse
import time

import dynamic_models as models
import numpy as np

BUILDS = {"forest": (models.forest_samples, models.forest_tape),
          "lm_16": (models.char_batch_samples, models.char_lm_16_tape),
          "lm_batch": (models.char_batch_samples, models.char_lm_batch_tape),
          "forest_fn": (models.forest_samples, models.forest_traced_tape),
          "lm_16_fn": (models.char_batch_samples, models.char_lm_16_traced_tape)}


def training(which: str, warm_up: int = 3):
    """``step()`` of one lazy training step of workload ``which``: returns its record,
    execute and SGD CPU seconds. ``warm_up`` steps run first."""
    import tape
    import tape.layers  # noqa: F401  (the models use them)
    import tape.optim
    samples, build = BUILDS[which]
    tape.seed(0)
    params, (loss_of,) = build(tape, samples(np.random.default_rng(0)))
    sgd = tape.optim.SGD(learning_rate=models.LEARNING_RATE)

    def step():
        with tape.lazy():
            tape.reset_global_tape()
            start = time.process_time()
            loss = loss_of()
            recorded = time.process_time()
            loss.backward()
            executed = time.process_time()
        sgd(params)
        return recorded - start, executed - recorded, time.process_time() - executed

    for _ in range(warm_up):
        step()
    return step


def batch_sizes(step) -> dict:
    """``{op type: [ops per kernel call]}`` of one more ``step()`` (forward batches and lone
    ops, in the order they ran; grad ops of the per-op path too; ``Accumulation`` and fused
    chains under those names)."""
    from tape import batching
    sizes = {}
    run_batch, run_one = batching.run_batch, batching.run_one

    def counted_batch(ops, rule):
        sizes.setdefault(ops[0].plan.info.type, []).append(len(ops))
        run_batch(ops, rule)

    def counted_one(op):
        what = op.plan.info.type if op.plan is not None else type(op).__name__
        sizes.setdefault(what, []).append(1)
        run_one(op)
    batching.run_batch, batching.run_one = counted_batch, counted_one
    try:
        step()
    finally:
        batching.run_batch, batching.run_one = run_batch, run_one
    return sizes


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=list(BUILDS),
                        help=f"any of {', '.join(BUILDS)} (default: all)")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--child", action="store_true",
                        help="run the steps of the first workload only (for valgrind)")
    parser.add_argument("--batches", action="store_true",
                        help="print the ops per kernel call of one step, by op type")
    args = parser.parse_args(argv)
    unknown = [w for w in args.workloads if w not in BUILDS]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}: choose from {', '.join(BUILDS)}")
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)    # (as dynamic.py: numpy's BLAS on one thread)
    except ImportError:
        pass
    if args.child:
        step = training(args.workloads[0])
        for _ in range(args.steps):
            step()
        return
    steps = {}
    for which in args.workloads:
        step = training(which)
        if args.batches:
            sizes = batch_sizes(step)
            calls = sum(len(ns) for ns in sizes.values())
            print(f"{which}: {sum(map(sum, sizes.values()))} ops in {calls} kernel calls")
            for what, ns in sorted(sizes.items(), key=lambda item: -sum(item[1])):
                print(f"  {what:30s} {sum(ns):5d} ops in {len(ns):3d} calls: {ns}")
        times = np.array([step() for _ in range(args.steps)]) * 1e3
        low, middle = times.min(axis=0), np.median(times, axis=0)
        print(f"{which}: ms per step, min (median) of {args.steps}: record {low[0]:.1f} "
              f"({middle[0]:.1f}), execute {low[1]:.1f} ({middle[1]:.1f}), SGD {low[2]:.1f} "
              f"({middle[2]:.1f})")
        steps[which] = low
    hand = steps.get("lm_batch")
    for which in ("lm_16", "lm_16_fn"):
        if hand is not None and which in steps:
            own = steps[which]
            bound = hand.sum() / (hand.sum() + own[0] - hand[0])
            print(f"{which} vs lm_batch: {hand.sum() / own.sum():.2f}x the hand batch's "
                  f"throughput; {bound:.2f}x if executing cost what the hand batch's does")


if __name__ == "__main__":
    main()
