"""``python -m tape.optim.compile_kernels``: compile ahead of time the kernels that training runs.

The workload is a few training steps of the multilayer perceptron of DESIGN.md's loop (batch
64, 784-256-256-10, ReLU, softmax cross-entropy) under each common optimizer (SGD, Momentum,
Adam), in float32 and float64. Every numba kernel these steps call is recorded with its argument
types, compiled for this machine and checked bit for bit against numba's JIT
(``kernels/aot_build.py``); afterwards a new process runs those calls without importing numba
(``kernels/aot.py``). ``make test`` and ``make demo`` run this; run it again after upgrading
numba (a module built for other sources or versions is never loaded).

    python -m tape.optim.compile_kernels [script.py ...]

Scripts named on the command line run too (as ``__main__``), so the kernels of your own
models join the module. The module goes into the installed ``tape/kernels/_aot``, or into
``TAPE_AOT_DIR`` when that is set (then set it when training too).
"""
from __future__ import annotations

import runpy
import sys

import numpy as np

import tape
from tape.kernels import aot_build

from . import SGD, Adam, Momentum

BATCH, SIZES = 64, (784, 256, 256, 10)
STEPS = 2


def train_mlp(optimizer, dtype, steps: int = STEPS) -> list:
    """``steps`` DyNet-style steps (reset, forward, backward, update) of a fresh MLP; its
    parameters."""
    from tape import layers
    rng = np.random.default_rng(0)
    model = [layers.Linear(n_in, n_out, act="relu" if i < len(SIZES) - 2 else None,
                           dtype=dtype)
             for i, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:]))]
    params = [p for layer in model for p in layer.params()]
    for p in params:    # the same values in every process
        p.value()[...] = rng.standard_normal(p.shape).astype(dtype) * 0.05
    x = rng.standard_normal((BATCH, SIZES[0])).astype(dtype)
    labels = rng.integers(0, SIZES[-1], (BATCH, 1))
    for _ in range(steps):
        tape.reset_global_tape()
        h = tape.Variable(x)
        for layer in model:
            h = layer(h)
        loss = tape.ops.mean(tape.ops.softmax_with_cross_entropy(h, tape.Variable(labels))[1])
        loss.backward()
        optimizer(params)
    return params


def workload(scripts=()) -> None:
    for dtype in ("float32", "float64"):
        for optimizer in (SGD(learning_rate=0.1), Momentum(learning_rate=0.1),
                          Adam(learning_rate=1e-3)):
            train_mlp(optimizer, dtype)
    for script in scripts:
        runpy.run_path(script, run_name="__main__")


def main(argv=None) -> int:
    scripts = sys.argv[1:] if argv is None else argv
    try:
        aot_build.build(lambda: workload(scripts))
    except ImportError as e:    # numba.pycc needs setuptools (and a C compiler)
        print(f"tape.optim.compile_kernels: cannot compile ahead of time: {e} (pip install "
              f"setuptools)", file=sys.stderr)
        return 1
    except PermissionError as e:
        print(f"tape.optim.compile_kernels: {e}; set TAPE_AOT_DIR to a writable directory, here "
              f"and when training", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
