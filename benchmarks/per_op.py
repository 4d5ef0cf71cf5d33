"""Per-op overhead: 100 tiny elementwise ops on a 32-element float32 vector, then a sum.

The chain alternates ``y * 1.0001`` and ``y + 0.0001``; what is measured is the fixed cost of
one op (dispatch, shape inference, recording, backward bookkeeping), not arithmetic.

    .venv/bin/python benchmarks/per_op.py [--quick] [--profile]

``--profile`` adds a cProfile of Tape's forward+backward loop (top 15 functions by tottime).
"""
from __future__ import annotations

import cProfile
import pstats

import numpy as np
from harness import (
    NUMPY,
    TAPE,
    TORCH,
    OtherLoad,
    import_tape_or_reason,
    import_torch,
    measure,
    parse_args,
    print_notes,
    print_table,
    threads_report,
    timing_options,
)

SIZE = 32
PAIRS = 50                      # 100 elementwise ops
SCALE, SHIFT = 1.0001, 0.0001
OPS = 2 * PAIRS + 1             # ... and the sum

x_np = np.random.default_rng(0).standard_normal(SIZE).astype(np.float32)


def numpy_forward():
    y = x_np
    for _ in range(PAIRS):
        y = y * SCALE
        y = y + SHIFT
    return y.sum()


def numpy_forward_backward():
    """The forward chain, then the reverse pass by hand: d sum / d y is ones; each scale op
    multiplies the gradient by its factor, each shift passes it through."""
    numpy_forward()
    grad = np.ones_like(x_np)
    for _ in range(PAIRS):
        grad = grad * SCALE
    return grad


def torch_functions(torch):
    x = torch.from_numpy(x_np.copy()).requires_grad_(True)

    def chain():
        y = x
        for _ in range(PAIRS):
            y = y * SCALE
            y = y + SHIFT
        return y.sum()

    def forward_backward():
        x.grad = None
        chain().backward()
        return x.grad.numpy()

    def no_grad_forward():
        with torch.no_grad():
            return chain()

    return chain, forward_backward, no_grad_forward


def tape_functions(tape):
    x = tape.Variable(x_np.copy(), stop_gradient=False)

    def chain():
        tape.reset_global_tape()
        y = x
        for _ in range(PAIRS):
            y = y * SCALE
            y = y + SHIFT
        return tape.ops.reduce_sum(y, reduce_all=True)

    def forward_backward():
        x.grad = None
        chain().backward()
        return x.grad.value()

    def no_grad_forward():
        with tape.no_grad():
            return chain()

    return chain, forward_backward, no_grad_forward


def check_gradients(results: dict) -> str:
    expected = np.full(SIZE, SCALE ** PAIRS, dtype=np.float32)
    bad = [lib for lib, grad in results.items()
           if not np.allclose(grad, expected, rtol=1e-5)]
    return ("gradients agree (all d loss/d x = 1.0001^50)" if not bad
            else f"WRONG gradient from: {', '.join(bad)}")


def profile_tape(forward_backward, iterations: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iterations):
        forward_backward()
    profiler.disable()
    print(f"\n### cProfile: Tape forward+backward, {iterations} iterations x {OPS} ops, "
          f"top 15 by tottime\n\n```")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    print("```")


def main(argv=None):
    parser_args = parse_args(__doc__.splitlines()[0], argv, extra=[
        ("--profile", "add a cProfile of Tape's forward+backward (top 15 by tottime)")])
    options = timing_options(parser_args.quick)
    torch = import_torch()
    tape, tape_missing = import_tape_or_reason("ops.reduce_sum", "ops.scale")
    per_op = 1e6 / OPS
    functions = {NUMPY: (numpy_forward, numpy_forward_backward, numpy_forward)}
    if torch is not None:
        functions[TORCH] = torch_functions(torch)
    if tape is not None:
        functions[TAPE] = tape_functions(tape)
    with OtherLoad() as load:
        seconds = [measure({lib: fns[i] for lib, fns in functions.items()},
                           **dict(options, settle=0.0))   # 32 elements: no thread pool wakes
                   for i in range(3)]
    forward, backward, no_grad = ({lib: t * per_op for lib, t in s.items()} for s in seconds)
    grads = {lib: fns[1]() for lib, fns in functions.items()}

    notes = {TORCH: None if torch else "torch not importable", TAPE: tape_missing}
    print(f"## Per-op overhead: {2 * PAIRS} elementwise ops + sum on float32[{SIZE}]\n")
    print(threads_report(torch))
    for title, figures in (("forward (recording for backward)", forward),
                           ("forward + backward to the leaf", backward),
                           ("forward under no_grad (numpy: same as forward)", no_grad)):
        rows = [(lib, figures.get(lib), notes.get(lib)) for lib in (NUMPY, TORCH, TAPE)]
        print_table(title, "µs per op", rows)
    print()
    print_notes([(f"µs per op = time per iteration / {OPS} ops; Tape's iteration includes "
                  "tape.reset_global_tape()."),
                 "numpy backward is a hand-written reverse pass (one multiply per scale op).",
                 check_gradients(grads), load.note()])
    if parser_args.profile and tape is not None:
        profile_tape(functions[TAPE][1], 200 if parser_args.quick else 2000)


if __name__ == "__main__":
    main()
