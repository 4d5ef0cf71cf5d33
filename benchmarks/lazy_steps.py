"""Where a lazy 16-sample training step of ``dynamic.py`` spends its time: recording the graph,
then executing it (``backward()``: the forward batches, the batched backward, freeing the
tape), then SGD.

Workloads: ``forest`` (Tree-LSTM, 16 trees per tape), ``lm_16`` (char LM, 16 separate sequences
per tape) and ``lm_batch`` (the same 16 sequences batched by hand); ``forest_fn`` and
``lm_16_fn`` are ``forest`` and ``lm_16`` with their cells as ``tape.function``s (one op per
cell call), and ``lm_16_seq`` is ``lm_16`` with each sequence's whole loss as one (one op per
sequence). The figures are the minimum and median CPU time (``time.process_time``) over the
steps, after three warm-up steps. On a loaded machine these move by tens of percent;
instructions do not: run ``--child`` (the steps only, no output) under
``valgrind --tool=callgrind`` for 2 and for 4 steps (with ``TAPE_AOT=0 NUMBA_CPU_NAME=generic``, as
valgrind knows no AVX-512, after one uncounted run that fills numba's disk cache) and halve the
difference.

    .venv/bin/python benchmarks/lazy_steps.py [forest lm_16 lm_batch forest_fn lm_16_fn
        lm_16_seq] [--steps N] [--batches]

``--batches`` first prints, per op type, how many ops each kernel call of one step ran (the
agenda's batch sizes: a forest step's cell ops in batches of one depth of 16 trees, an LM
step's in batches of 16).

With ``lm_batch`` and ``lm_16``, ``lm_16_fn`` or ``lm_16_seq`` in one run, it ends with issue
12's LM ratio by these minima (the hand batch's step over the 16 sequences' step), and the
ratio the 16 sequences would reach if their execution cost no more than the hand batch's: what
their recording alone leaves possible.

``--kernels`` also splits execute into the time under ``batching.invoke`` (the ops' kernels, a
traced function's generated forward and backward included: for ``lm_16_seq``, all of a
sequence's) and the rest (which holds the gradient sums, ``Accumulation`` or the written
backward's adds, and fused loops, which run outside ``invoke``; no LM workload fuses), and,
with ``lm_batch`` in the run, prints the budget of a 0.9x ratio: what the 16 sequences' step
may cost, what their kernels and SGD leave of it for recording and execution bookkeeping, and,
where they record more ops than the hand batch, that per recorded op beyond the hand batch's.
``--floor`` times the same user loop as ``lm_16`` recording into the leanest Python records
(per op a list holding its inputs, per output an object holding ``(op, index)``, no check, no
shape) and freeing them: about what no pure-Python recorder of this graph goes under.
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
          "lm_16_fn": (models.char_batch_samples, models.char_lm_16_traced_tape),
          "lm_16_seq": (models.char_batch_samples, models.char_lm_16_sequence_tape)}


def training(which: str, warm_up: int = 3, kernels: bool = False):
    """``step()`` of one lazy training step of workload ``which``: returns its record,
    execute and SGD CPU seconds, the seconds of execute under ``batching.invoke`` (with
    ``kernels``; else 0) and the number of ops recorded. ``warm_up`` steps run first."""
    import tape
    import tape.layers  # noqa: F401  (the models use them)
    import tape.optim
    from tape import batching
    samples, build = BUILDS[which]
    tape.seed(0)
    params, (loss_of,) = build(tape, samples(np.random.default_rng(0)))
    sgd = tape.optim.SGD(learning_rate=models.LEARNING_RATE)
    under_invoke = [0.0]
    invoke = batching.invoke

    def timed_invoke(*args):
        start = time.process_time()
        try:
            return invoke(*args)
        finally:
            under_invoke[0] += time.process_time() - start

    def step():
        under_invoke[0] = 0.0
        with tape.lazy():
            tape.reset_global_tape()
            start = time.process_time()
            loss = loss_of()
            recorded = time.process_time()
            ops = len(tape.get_global_tape())
            if kernels:
                batching.invoke = timed_invoke
            try:
                loss.backward()
            finally:
                batching.invoke = invoke
            executed = time.process_time()
        sgd(params)
        return (recorded - start, executed - recorded, time.process_time() - executed,
                under_invoke[0], ops)

    for _ in range(warm_up):
        step()
    return step


class _Output:
    __slots__ = ("ref",)


def _record(tape: list, inputs, outputs: int, new=object.__new__):
    """The leanest record of one op: a list holding its inputs, on ``tape``; per output an
    object holding ``(op, index)`` (a Variable has to be an object of its own class)."""
    op = [inputs]
    tape.append(op)
    if outputs == 1:
        v = new(_Output)
        v.ref = (op, 0)
        return v
    made = []
    for k in range(outputs):
        v = new(_Output)
        v.ref = (op, k)
        made.append(v)
    return made


def floor_seconds(steps: int) -> float:
    """Min CPU seconds over ``steps`` of recording ``lm_16``'s 594 ops (``models.char_lm_tape``'s
    loop over 16 sequences: embedding, split, 30 cell steps, concat, Linear's two ops,
    cross-entropy, mean; then sum and scale) into the leanest records, and freeing them."""
    sequences, length = models.FOREST, models.CHAR_LENGTH
    weights = zeros = ids = _Output()

    def loss():
        tape, losses = [], []
        for _ in range(sequences):
            state, hs = (zeros, zeros), []
            for x in _record(tape, (_record(tape, (ids, weights), 1),), length):
                state = _record(tape, (x, *state, weights, weights, weights, weights), 2)
                hs.append(state[0])
            logits = _record(tape, (_record(tape, (_record(tape, hs, 1), weights), 1), weights), 1)
            losses.append(_record(tape, (_record(tape, (logits, ids), 2)[1],), 1))
        _record(tape, (_record(tape, losses, 1),), 1)
        return tape

    best = float("inf")
    for _ in range(steps):
        start = time.process_time()
        recorded = loss()
        assert len(recorded) == 594
        del recorded
        best = min(best, time.process_time() - start)
    return best


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
    parser.add_argument("--kernels", action="store_true",
                        help="split execute into kernels (under batching.invoke) and the rest")
    parser.add_argument("--floor", action="store_true",
                        help="time lm_16's recording into the leanest Python records")
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
        step = training(which, kernels=args.kernels)
        if args.batches:
            sizes = batch_sizes(step)
            calls = sum(len(ns) for ns in sizes.values())
            print(f"{which}: {sum(map(sum, sizes.values()))} ops in {calls} kernel calls")
            for what, ns in sorted(sizes.items(), key=lambda item: -sum(item[1])):
                print(f"  {what:30s} {sum(ns):5d} ops in {len(ns):3d} calls: {ns}")
        times = np.array([step() for _ in range(args.steps)])
        ops = int(times[0, 4])
        times = times[:, :4] * 1e3
        low, middle = times.min(axis=0), np.median(times, axis=0)
        line = (f"{which}: {ops} ops; ms per step, min (median) of {args.steps}: record "
                f"{low[0]:.2f} ({middle[0]:.2f}), execute {low[1]:.2f} ({middle[1]:.2f}), SGD "
                f"{low[2]:.2f} ({middle[2]:.2f})")
        if args.kernels:
            rest = times[:, 1] - times[:, 3]
            line += (f"; of execute, kernels {low[3]:.2f} ({middle[3]:.2f}) and the rest "
                     f"{rest.min():.2f} ({np.median(rest):.2f})")
        print(line)
        steps[which] = (low[:3], low[3], rest.min() if args.kernels else None, ops)
    hand = steps.get("lm_batch")
    for which in ("lm_16", "lm_16_fn", "lm_16_seq"):
        if hand is not None and which in steps:
            _ratios(which, hand, steps[which], args.kernels)
    if args.floor:
        print(f"floor: lm_16's 594 ops recorded into the leanest Python records and freed: "
              f"{floor_seconds(args.steps) * 1e3:.2f} ms (min of {args.steps})")


def _ratios(which: str, hand: tuple, own: tuple, kernels: bool) -> None:
    """Issue 12's LM ratio of ``which`` against the hand batch by their minima (``steps``'s
    entries); with ``kernels``, the budget of a 0.9x ratio."""
    (hand_phases, _, hand_rest, hand_ops), (phases, kernel, _, ops) = hand, own
    bound = hand_phases.sum() / (hand_phases.sum() + phases[0] - hand_phases[0])
    print(f"{which} vs lm_batch: {hand_phases.sum() / phases.sum():.2f}x the hand batch's "
          f"throughput; {bound:.2f}x if executing cost what the hand batch's does")
    if kernels:
        allowed = hand_phases.sum() / 0.9
        left = allowed - kernel - phases[2]
        hand_python = hand_phases[0] + hand_rest
        line = (f"{which} at 0.9x: a step of at most {allowed:.2f} ms; its kernels and SGD "
                f"take {kernel + phases[2]:.2f}, leaving {left:.2f} ms for recording and "
                f"execution bookkeeping (today {phases[0]:.2f} + {phases[1] - kernel:.2f}); the "
                f"hand batch's own take {hand_python:.2f}")
        if ops > hand_ops:      # (lm_16_seq records fewer ops than the hand batch)
            line += (f", so the {ops - hand_ops} ops it has beyond the hand batch's {hand_ops} "
                     f"may cost {(left - hand_python) * 1e3 / (ops - hand_ops):.2f} us each, "
                     "recorded, run and freed")
        print(line)


if __name__ == "__main__":
    main()
