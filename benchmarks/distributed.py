"""Data-parallel throughput: the medium MLP on 1 process against 2 MPI ranks, 1 BLAS thread each.

The model and step are benchmarks/mlp.py's (batch 256, 1024-1024-1024-10, ReLU, mean softmax
cross-entropy, SGD), float32, eager. One process trains on the whole batch of 256; two ranks
(``mpirun -np 2``, tape.distributed.DataParallel) train on 128 examples each, their gradients
averaged in buckets during backward. Both take the same step (the losses are checked to
agree), so the throughput ratio is the ratio of step times. Each configuration runs in fresh
processes with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = 1.

    .venv/bin/python benchmarks/distributed.py [--quick]

Prints examples per second of each, their ratio (the target on a 2-core machine is at least
1.8x), and per step the time each rank spent on communication that backward did not hide.
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


def worker(steps: int, warmup: int) -> dict:
    """One rank's (or the one process's) training: its step times and communication time."""
    import numpy as np
    from mlp import LEARNING_RATE, make_problem, tape_model

    import tape
    from tape import distributed, optim
    distributed.init()
    rank, world = distributed.rank(), distributed.world_size()
    params, x, labels = make_problem(BATCH, WIDTHS)
    part = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    x_mine, y_mine = x[part], labels[part].reshape(-1, 1)
    loss_fn, trainable = tape_model(tape, params)
    model = distributed.DataParallel(trainable)
    sgd = optim.SGD(learning_rate=LEARNING_RATE)
    losses, times, cpu_times, communication = [], [], [], []
    for _ in range(warmup + steps):
        distributed.barrier()
        start, talked = time.perf_counter(), model.communication_seconds
        cpu_start = time.process_time()
        tape.reset_global_tape()
        loss = loss_fn(tape.Variable(x_mine), tape.Variable(y_mine))
        loss.backward()
        sgd(trainable)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
        communication.append(model.communication_seconds - talked)
        losses.append(float(loss.item()))
    mean_loss = distributed.allreduce(tape.Variable(np.array(losses)), op="mean").numpy()
    return {"rank": rank, "world": world, "step": statistics.median(times[warmup:]),
            "cpu": statistics.median(cpu_times[warmup:]),
            "communication": statistics.median(communication[warmup:]),
            "losses": mean_loss[:3].tolist()}


def _mpirun(n: int) -> list:
    command = ["mpirun", "-np", str(n), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    # shared memory between the ranks (one copy per message through Linux's CMA), mpirun's own
    # wiring over loopback
    return command + ["--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"]


def run(ranks: int, steps: int, warmup: int) -> list:
    """Results of every rank of a fresh run on ``ranks`` processes, by rank."""
    with tempfile.TemporaryDirectory() as results:
        command = [sys.executable, __file__, "--worker", str(steps), str(warmup), results]
        if ranks > 1:
            command = _mpirun(ranks) + command
        done = subprocess.run(command, capture_output=True, text=True,
                              env={**os.environ, **ONE_THREAD}, timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
        return [json.loads(path.read_text())
                for path in sorted(pathlib.Path(results).glob("rank-*.json"))]


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv)
    if shutil.which("mpirun") is None:
        raise SystemExit("mpirun not found: install Open MPI (make test does, on Debian)")
    steps, warmup = (5, 2) if args.quick else (30, 5)
    with OtherLoad() as load:
        one = run(1, steps, warmup)[0]
        two = run(2, steps, warmup)
    step_two = max(r["step"] for r in two)
    ratio = one["step"] / step_two
    print(f"\n### Data-parallel MLP, batch {BATCH}, {'-'.join(map(str, WIDTHS))}, float32, "
          f"1 BLAS thread per process\n")
    cpu_two = max(r["cpu"] for r in two)
    print("| processes | ms per step | examples / s | vs 1 process | ms per step in "
          "communication | CPU ms per step | vs 1 process, by CPU time |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| 1 | {one['step'] * 1e3:.2f} | {BATCH / one['step']:.0f} | 1.00× | — | "
          f"{one['cpu'] * 1e3:.2f} | 1.00× |")
    print(f"| 2 | {step_two * 1e3:.2f} | {BATCH / step_two:.0f} | {ratio:.2f}× | "
          + ", ".join(f"{r['communication'] * 1e3:.2f} (rank {r['rank']})" for r in two)
          + f" | {cpu_two * 1e3:.2f} | {one['cpu'] / cpu_two:.2f}× |")
    agree = all(abs(a - b) <= 1e-4 * max(1.0, abs(a))
                for a, b in zip(one["losses"], two[0]["losses"]))
    print()
    print_notes([
        f"{steps} timed steps after {warmup} warm-up steps; medians, the slower rank's step",
        f"losses of the first steps {'agree' if agree else 'DISAGREE'}: 1 process "
        f"{one['losses']}, 2 ranks {two[0]['losses']}",
        "communication: packing, starting and waiting for the bucket allreduces and "
        "unpacking, as far as backward did not hide it",
        "CPU time: what each process itself computed (waiting polls, which yields the core); "
        "on a busy machine its ratio hints at the throughput ratio of a quiet one, where each "
        "rank has a core",
        load.note(),
    ])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        result = worker(int(sys.argv[2]), int(sys.argv[3]))
        pathlib.Path(sys.argv[4], f"rank-{result['rank']}.json").write_text(json.dumps(result))
    else:
        main()
