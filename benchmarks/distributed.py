"""Data-parallel throughput: the medium MLP on 1 process against 2 MPI ranks, 1 BLAS thread each.

The model and step are benchmarks/mlp.py's (batch 256, 1024-1024-1024-10, ReLU, mean softmax
cross-entropy, SGD), float32, eager. One process trains on the whole batch of 256; two ranks
(``mpirun -np 2``, tape.distributed.DataParallel) train on 128 examples each, their gradients
averaged in buckets during backward. Both take the same step (the losses are checked to
agree), so the throughput ratio is the ratio of step times. Each configuration runs in fresh
processes with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = 1.

The ceiling: two processes that each run the batch-128 step at the same time with no
communication at all (each on its own half of the batch, its own SGD step) do all the
computation two ranks do and nothing else; their throughput over the one process's bounds
what any gradient exchange can reach on this machine. One process alone at batch 128 tells how
much of that is the smaller batch and how much the two processes sharing the machine.

    .venv/bin/python benchmarks/distributed.py [--quick]

Prints examples per second of each, their ratio (the target on a 2-core machine is at least
1.8x), per step the time each rank spent on communication that backward did not hide, and where
a step goes (forward, backward, optimizer update) in wall and CPU time.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from harness import OtherLoad, parse_args, print_notes

BATCH, WIDTHS = 256, (1024, 1024, 1024, 10)
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "MKL_NUM_THREADS")}
# backward's own work, then the communication DataParallel does inside backward
PHASES = ("forward", "backward", "communication", "update", "step")


def worker(batch: int, data_parallel: bool, steps: int, warmup: int) -> dict:
    """One rank's (or the one process's) training on ``batch`` examples a step: medians of its
    phases' wall and CPU times and of its communication time. Without ``data_parallel`` each
    process trains on its own, with no collective between the first and the last step."""
    import numpy as np
    from mlp import LEARNING_RATE, make_problem, tape_model

    import tape
    from tape import distributed, optim
    distributed.init()
    rank, world = distributed.rank(), distributed.world_size()
    params, x, labels = make_problem(BATCH, WIDTHS)
    part = slice(rank * batch, (rank + 1) * batch)
    x_mine, y_mine = x[part], labels[part].reshape(-1, 1)
    loss_fn, trainable = tape_model(tape, params)
    model = distributed.DataParallel(trainable) if data_parallel else None
    sgd = optim.SGD(learning_rate=LEARNING_RATE)

    def talked():
        return ((model.communication_seconds, model.communication_cpu_seconds)
                if data_parallel else (0.0, 0.0))

    losses, times = [], {"wall": [], "cpu": []}
    distributed.barrier()
    for _ in range(warmup + steps):
        if data_parallel:
            distributed.barrier()
        marks = [(time.perf_counter(), time.process_time())]
        tape.reset_global_tape()
        loss = loss_fn(tape.Variable(x_mine), tape.Variable(y_mine))
        marks.append((time.perf_counter(), time.process_time()))
        before = talked()
        loss.backward()
        communication = [b - a for a, b in zip(before, talked())]
        marks.append((time.perf_counter(), time.process_time()))
        sgd(trainable)
        marks.append((time.perf_counter(), time.process_time()))
        for clock in (0, 1):
            forward, backward, update = (b[clock] - a[clock]
                                         for a, b in zip(marks[:-1], marks[1:]))
            times[("wall", "cpu")[clock]].append(
                (forward, backward - communication[clock], communication[clock], update,
                 marks[-1][clock] - marks[0][clock]))
        losses.append(float(loss.item()))
    distributed.barrier()
    if data_parallel:
        losses = distributed.allreduce(tape.Variable(np.array(losses)), op="mean").numpy()
    gemm = gemm_times(np, x, params[1][0]) if world == 1 and not data_parallel else None
    return {"rank": rank, "world": world, "losses": list(losses[:3]), "gemm": gemm,
            "fastest": min(s[-1] for s in times["wall"][warmup:]),
            **{clock: {phase: statistics.median(s[i] for s in samples[warmup:])
                       for i, phase in enumerate(PHASES)}
               for clock, samples in times.items()}}


def gemm_times(np, x, w, repeats: int = 30) -> dict:
    """The BLAS alone: fastest seconds of ``x[:batch] @ w`` (a hidden layer's forward GEMM)
    at the whole batch and at half of it."""
    times = {}
    for batch in (BATCH, BATCH // 2):
        rows = np.ascontiguousarray(x[:batch])
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            rows @ w
            best = min(best, time.perf_counter() - start)
        times[batch] = best
    return times


def _mpirun(n: int) -> list:
    command = ["mpirun", "-np", str(n), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    # shared memory between the ranks (one copy per message through Linux's CMA), mpirun's own
    # wiring over loopback
    return command + ["--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"]


def run(ranks: int, batch: int, data_parallel: bool, steps: int, warmup: int) -> list:
    """Results of every process of a fresh run on ``ranks`` processes, by rank."""
    with tempfile.TemporaryDirectory() as results:
        command = [sys.executable, __file__, "--worker", str(batch), str(int(data_parallel)),
                   str(steps), str(warmup), results]
        if ranks > 1:
            command = _mpirun(ranks) + command
        done = subprocess.run(command, capture_output=True, text=True,
                              env={**os.environ, **ONE_THREAD}, timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
        return [json.loads(path.read_text())
                for path in sorted(pathlib.Path(results).glob("rank-*.json"))]


def _slowest(results: list, clock: str, phase: str = "step") -> float:
    return max(r[clock][phase] for r in results)


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv)
    if shutil.which("mpirun") is None:
        raise SystemExit("mpirun not found: install Open MPI (make test does, on Debian)")
    steps, warmup = (5, 2) if args.quick else (30, 5)
    half = BATCH // 2
    with OtherLoad() as load:
        configurations = {
            "1 process, batch 256": run(1, BATCH, True, steps, warmup),
            "1 process, batch 128, alone": run(1, half, False, steps, warmup),
            "2 processes, batch 128 each, no communication (the ceiling)":
                run(2, half, False, steps, warmup),
            "2 ranks, batch 128 each, DataParallel": run(2, half, True, steps, warmup),
        }
    one = configurations["1 process, batch 256"][0]
    print(f"\n### Data-parallel MLP, batch {BATCH}, {'-'.join(map(str, WIDTHS))}, float32, "
          f"1 BLAS thread per process\n")
    print("| processes | ms per step | examples / s | vs 1 process | ms per step in "
          "communication | CPU ms per step | vs 1 process, by CPU time | fastest step, ms | "
          "vs 1 process, by fastest step |")
    print("| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, results in configurations.items():
        # a step of the 2 processes covers the whole batch; the lone batch-128 process takes
        # two of its steps for one batch of 256
        steps_per_batch = BATCH // (half * len(results)) if "128" in name else 1
        step = _slowest(results, "wall") * steps_per_batch
        cpu = _slowest(results, "cpu") * steps_per_batch
        fastest = max(r["fastest"] for r in results) * steps_per_batch
        talk = ("—" if "DataParallel" not in name else ", ".join(
            f"{r['wall']['communication'] * 1e3:.2f} (rank {r['rank']})" for r in results))
        print(f"| {name} | {step * 1e3:.2f} | {BATCH / step:.0f} | "
              f"{one['wall']['step'] / step:.2f}× | {talk} | {cpu * 1e3:.2f} | "
              f"{one['cpu']['step'] / cpu:.2f}× | {fastest * 1e3:.2f} | "
              f"{one['fastest'] / fastest:.2f}× |")
    print("\nWhere a step of each process goes, ms (wall / CPU; the slower process of each "
          "phase):\n")
    print("| processes | " + " | ".join(PHASES) + " |")
    print("| :--- |" + " ---: |" * len(PHASES))
    for name, results in configurations.items():
        print(f"| {name} | " + " | ".join(
            f"{_slowest(results, 'wall', p) * 1e3:.2f} / {_slowest(results, 'cpu', p) * 1e3:.2f}"
            for p in PHASES) + " |")
    two = configurations["2 ranks, batch 128 each, DataParallel"]
    gemm = configurations["1 process, batch 128, alone"][0]["gemm"]
    agree = all(abs(a - b) <= 1e-4 * max(1.0, abs(a))
                for a, b in zip(one["losses"], two[0]["losses"]))
    print()
    print_notes([
        f"{steps} timed steps after {warmup} warm-up steps; medians; the slower process's step",
        f"losses of the first steps {'agree' if agree else 'DISAGREE'}: 1 process "
        f"{one['losses']}, 2 ranks {two[0]['losses']}",
        "the lone batch-128 process: two of its steps per batch of 256 (1 process's work at "
        "the smaller batch)",
        f"the BLAS alone, one thread (fastest of 30): a hidden layer's GEMM takes "
        f"{gemm[str(BATCH)] * 1e3:.2f} ms at batch {BATCH} and {gemm[str(half)] * 1e3:.2f} ms at "
        f"{half}: even with a core each, two processes at {half} get through the GEMMs of a "
        f"batch of {BATCH} at most {gemm[str(BATCH)] / gemm[str(half)]:.2f}× as fast as one "
        f"process",
        "communication: starting the buckets' exchanges, summing this rank's chunks, waiting "
        "and setting the averaged .grad, as far as backward did not hide it; backward: the "
        "rest of backward",
        "fastest step: the fastest of each process's timed steps (of the slower process): "
        "on a shared machine, the steps no other process slowed down",
        "CPU time: what each process itself computed (waiting polls, which yields the core); "
        "on a busy machine its ratio hints at the throughput ratio of a quiet one, where each "
        "rank has a core",
        load.note(),
    ])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        result = worker(int(sys.argv[2]), bool(int(sys.argv[3])), int(sys.argv[4]),
                        int(sys.argv[5]))
        pathlib.Path(sys.argv[6], f"rank-{result['rank']}.json").write_text(json.dumps(result))
    else:
        main()
