"""Per-op cost in CPU instructions: the 100-op chain of per_op.py, counted by valgrind.

    .venv/bin/python benchmarks/instructions.py [--quick] [--lazy]

``--lazy`` counts only lazy Tape's recording of the chain (inside ``tape.lazy()``, nothing
computed; the ops are freed unrun when the block ends), as dynamic.py's "recorded only" row
times it.

Time on a shared 2-core machine moves by tens of percent between runs; instructions executed do
not. Each library's chain runs in a child process under ``valgrind --tool=callgrind`` twice, for
few and for more iterations; the difference divided by the extra ops is the instructions per op
(start-up, imports and warm-up cancel). Needs valgrind (Debian's package); PyTorch's column
needs torch.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from harness import NUMPY, TAPE, TORCH, import_torch, parse_args, print_notes, print_table

CHILD = """
import sys
import numpy as np
lib, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
x_np = np.random.default_rng(0).standard_normal(32).astype(np.float32)
if lib == "numpy":
    def step():
        y = x_np
        for _ in range(50):
            y = y * 1.0001
            y = y + 0.0001
        return y.sum()
elif lib == "PyTorch":
    import torch
    torch.set_num_threads(1)
    x = torch.from_numpy(x_np.copy()).requires_grad_(True)
    def step():
        y = x
        for _ in range(50):
            y = y * 1.0001
            y = y + 0.0001
        loss = y.sum()
        if mode == "backward":
            x.grad = None
            loss.backward()
elif mode == "record":
    import tape
    x = tape.Variable(x_np.copy(), stop_gradient=False)
    def step():
        with tape.lazy():
            tape.reset_global_tape()
            y = x
            for _ in range(50):
                y = y * 1.0001
                y = y + 0.0001
            tape.ops.reduce_sum(y, reduce_all=True)
else:
    import tape
    x = tape.Variable(x_np.copy(), stop_gradient=False)
    def step():
        tape.reset_global_tape()
        y = x
        for _ in range(50):
            y = y * 1.0001
            y = y + 0.0001
        loss = tape.ops.reduce_sum(y, reduce_all=True)
        if mode == "backward":
            x.grad = None
            loss.backward()
for _ in range(3 + n):
    step()
"""
OPS = 101


def instructions(lib: str, mode: str, iterations: int) -> int:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           sys.executable, "-c", CHILD, lib, mode, str(iterations)],
                          capture_output=True, text=True, env=env, check=True)
    return int(re.search(r"Collected : (\d+)", done.stderr).group(1))


def per_op(lib: str, mode: str, few: int, more: int) -> float:
    return (instructions(lib, mode, more) - instructions(lib, mode, few)) / (more - few) / OPS


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv,
                      [("--lazy", "count lazy Tape's recording of the chain only")])
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing measured")
        return
    few, more = (5, 15) if args.quick else (10, 60)
    if args.lazy:
        figure = per_op(TAPE, "record", few, more) / 1000
        print(f"## Instructions per op: {OPS - 1} elementwise ops + sum on float32[32]\n")
        print_table("Tape, lazy, recorded only (nothing computed)",
                    "thousand instructions per op", [(TAPE, figure, None)])
        print()
        print_notes([f"valgrind --tool=callgrind, {more} minus {few} iterations of the chain, "
                     "per op."])
        return
    libraries = [NUMPY, TAPE] + ([TORCH] if import_torch() is not None else [])
    print(f"## Instructions per op: {OPS - 1} elementwise ops + sum on float32[32]\n")
    for title, mode in (("forward (recording for backward)", "forward"),
                        ("forward + backward to the leaf", "backward")):
        figures = {lib: per_op(lib, mode, few, more) for lib in libraries
                   if not (lib == NUMPY and mode == "backward")}
        rows = [(lib, figures.get(lib) and figures[lib] / 1000,
                 None if lib in figures else "no hand-written backward" if lib == NUMPY
                 else "torch not importable") for lib in (NUMPY, TORCH, TAPE)]
        print_table(title, "thousand instructions per op", rows)
    print()
    print_notes([f"valgrind --tool=callgrind, {more} minus {few} iterations of the chain, "
                 "per op; one thread for every library."])


if __name__ == "__main__":
    main()
