"""What each rank runs under mpirun in tests/distributed (one mode per launch).

``same``: data-parallel training on this job's ranks against one process with the whole batch,
eagerly and in static mode, float64 and float32; the collectives and the rank-0 checkpoint
along the way. ``resume``: continue from that checkpoint on this job's (other) number of ranks.
``raise``, ``die``, ``hang``: rank 1 fails in that way while rank 0 waits in an allreduce.

    python worker.py MODE RESULTS_DIR [CHECKPOINT]

Each rank writes what it found to RESULTS_DIR/rank-<rank>.json for the test to read.
"""
import json
import os
import signal
import sys
import time

import numpy as np

import tape
from tape import distributed, layers, optim, static
from tape import functional as F

N_EXAMPLES, BATCH, STEPS, CHECKPOINT_STEP, SEED = 48, 12, 6, 3, 7
TOLERANCE = {"float64": 1e-10, "float32": 1e-5}


def data(dtype):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((N_EXAMPLES, 6)).astype(dtype),
            rng.integers(0, 3, (N_EXAMPLES, 1)).astype(np.int64))


def model(dtype, seed):
    tape.seed(seed)
    return layers.Sequential(layers.Linear(6, 16, act="tanh", dtype=dtype),
                             layers.Linear(16, 3, dtype=dtype))


def batch_indices(step, rank, world):
    """This rank's part of global batch ``step``: its shard of the epoch, cut into batches of
    BATCH / world (the k-th batches of all ranks make the k-th global batch)."""
    per_epoch = N_EXAMPLES // BATCH
    epoch, k = divmod(step, per_epoch)
    mine = distributed.shard(N_EXAMPLES, rank, world, SEED, epoch)
    size = BATCH // world
    return mine[k * size:(k + 1) * size]


def eager_steps(net, opt, x, y, steps, rank, world):
    for step in steps:
        idx = batch_indices(step, rank, world)
        tape.reset_global_tape()
        loss = F.cross_entropy(net(tape.Variable(x[idx])), y[idx])
        loss.backward()
        opt(net.params())


def watch_overlap(net):
    """What had happened when backward reported the first layer's bias, the last gradient of
    the first bucket: [buckets started, whether the first layer's weight gradient was still to
    be computed] (filled in by the first backward)."""
    from tape import backward
    w1, b1 = net.params()[:2]
    seen = []

    def probe(leaf):
        if leaf is b1 and not seen:
            seen.extend([net.buckets_started, w1.grad is None])
    backward.grad_ready_hooks.append(probe)   # after DataParallel's own
    return seen


def reference(dtype, steps):
    """One process, the whole batch: the parameters after ``steps``."""
    x, y = data(dtype)
    net, opt = model(dtype, 0), optim.Momentum(0.1, momentum=0.9)
    eager_steps(net, opt, x, y, range(steps), 0, 1)
    return [p.value().copy() for p in net.params()]


def difference(params, expected):
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - b)))
               for a, b in zip(params, expected))


def same(checkpoint_path):
    rank, world = distributed.rank(), distributed.world_size()
    result = {}
    for dtype in ("float64", "float32"):
        x, y = data(dtype)
        expected = reference(dtype, STEPS)
        # eager: each rank starts from its own initialisation (rank 0 from the reference's);
        # DataParallel broadcasts rank 0's
        net = distributed.DataParallel(model(dtype, rank), bucket_mb=0.0005)
        opt = optim.Momentum(0.1, momentum=0.9)
        if dtype == "float64":
            result["overlap"] = watch_overlap(net)
        eager_steps(net, opt, x, y, range(CHECKPOINT_STEP), rank, world)
        if dtype == "float64":
            wrote = distributed.checkpoint.save(checkpoint_path, tape.checkpoint.combine(
                model=net.layer.state_dict(), optimizer=opt.state_dict(net.layer),
                run={"step": CHECKPOINT_STEP, "rank": rank}))
            result["wrote_checkpoint"] = wrote
        eager_steps(net, opt, x, y, range(CHECKPOINT_STEP, STEPS), rank, world)
        result[f"eager_{dtype}"] = difference([p.value() for p in net.params()], expected)
        result[f"buckets_{dtype}"] = net.bucket_sizes
        net.close()
        # static: the traced program rewritten with c_broadcast, c_allreduce_sum and scale;
        # the startup program broadcasts rank 0's parameters
        local = model(dtype, 0 if rank == 0 else rank + 100)
        program = static.trace(lambda a, b, net=local: F.cross_entropy(net(a), b), x[:2], y[:2])
        (cost,) = program.fetch_names
        updates = optim.Momentum(0.1, momentum=0.9).minimize(cost, program)
        startup = static.data_parallel(program)
        exe = static.Executor()
        exe.run(startup, targets=startup.global_block().ops)
        for step in range(STEPS):
            idx = batch_indices(step, rank, world)
            exe.run(program, {"input_0": x[idx], "input_1": y[idx]}, [cost], targets=updates)
        result[f"static_{dtype}"] = difference(
            [program.scope.find_var(p.name).value for p in local.params()], expected)
        result["static_ops"] = sorted({op.type for op in program.global_block().ops
                                       if op.type.startswith("c_") or op.type == "scale"})
    total = distributed.allreduce(tape.Variable(np.array([rank + 1.0])), op="sum")
    mean = distributed.allreduce(tape.Variable(np.array([rank + 1.0])), op="mean")
    result["allreduce"] = [float(total.item()), float(mean.item())]
    last = world - 1
    result["broadcast_from_last"] = float(tape.ops.c_broadcast(
        tape.Variable(np.array([10.0 * rank])), root=last).item())
    result["partial"] = gradients_on_some_ranks(rank, world)
    return result


def gradients_on_some_ranks(rank, world):
    """Layers ``used`` (by every rank's loss), ``first`` (by rank 0's only) and ``unused``
    (by none), in buckets that mix them: [difference of used's averaged gradient from its
    local one, of first's from rank 0's / world, whether unused has no gradient]."""
    tape.seed(3)      # the same parameters on every rank
    used, first, unused = (layers.Linear(4, 3, dtype="float64") for _ in range(3))
    x = tape.Variable(np.arange(8.0).reshape(2, 4))

    def backward(on_rank_0):
        tape.reset_global_tape()
        loss = tape.ops.mean(used(x))
        if on_rank_0:
            loss = loss + tape.ops.mean(tape.ops.tanh(first(x)))
        loss.backward()

    backward(True)      # rank 0's gradients, before DataParallel takes part
    local = {p.name: p.grad.value().copy() for p in used.params() + first.params()}
    for p in used.params() + first.params():
        p.grad = None
    net = distributed.DataParallel(used.params() + first.params() + unused.params(),
                                   bucket_mb=0.0002)   # [unused, first], [used]
    backward(rank == 0)
    net.close()
    return [difference([p.grad.value() for p in used.params()],
                       [local[p.name] for p in used.params()]),
            difference([p.grad.value() for p in first.params()],
                       [local[p.name] / world for p in first.params()]),
            all(p.grad is None for p in unused.params())]


def resume(checkpoint_path):
    rank, world = distributed.rank(), distributed.world_size()
    x, y = data("float64")
    parts = tape.checkpoint.split(distributed.checkpoint.load(checkpoint_path))
    net = model("float64", rank + 50)
    net.load_state_dict(parts["model"])
    net = distributed.DataParallel(net)
    opt = optim.Momentum(0.1, momentum=0.9)
    opt.load_state_dict(parts["optimizer"], net.layer)
    start = int(parts["run"]["step"])
    eager_steps(net, opt, x, y, range(start, STEPS), rank, world)
    return {"eager_float64": difference([p.value() for p in net.params()],
                                        reference("float64", STEPS)),
            "resumed_from": start, "written_by": int(parts["run"]["rank"])}


def fault(mode):
    rank = distributed.rank()
    net = distributed.DataParallel(model("float64", 0))
    x, y = data("float64")
    if rank == 1:
        if mode == "raise":
            raise RuntimeError("injected failure on rank 1")
        if mode == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(600)     # hang: alive, but never joins the allreduce
    loss = F.cross_entropy(net(tape.Variable(x[:4])), y[:4])
    loss.backward()         # waits for rank 1 in the gradient allreduce
    return {"unexpected": "rank 0 finished its allreduce without rank 1"}


def main():
    mode, results = sys.argv[1], sys.argv[2]
    path = sys.argv[3] if len(sys.argv) > 3 else None
    distributed.init()
    run = {"same": same, "resume": resume}.get(mode)
    result = run(path) if run else fault(mode)
    result["rank"], result["world_size"] = distributed.rank(), distributed.world_size()
    with open(os.path.join(results, f"rank-{result['rank']}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
