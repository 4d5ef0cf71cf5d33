"""Per-op overhead: 100 tiny elementwise ops on a 32-element float32 vector, then a sum; and a
mix of 99 small ops of the kinds dynamic models use.

The chain alternates ``y * 1.0001`` and ``y + 0.0001``; what is measured is the fixed cost of
one op (dispatch, shape inference, recording, backward bookkeeping), not arithmetic.

The mix is six LSTM-cell-like blocks in a row, hidden 32, batch 1, sharing their weights as an
unrolled RNN does; each block is 16 ops::

    gates = concat([x, h]) @ W + b         concat, (1, 64) x (64, 128) matmul, bias add
    i, f, g, o = split(gates, 4)           split
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)
    x = relu(h @ V + v)                    (1, 32) x (32, 32) matmul, bias add, relu

then ``mean(softmax(x) * c)``: 99 ops.

    .venv/bin/python benchmarks/per_op.py [--quick] [--profile] [--cpu-time]

``--profile`` adds a cProfile of Tape's forward+backward loop (top 15 functions by tottime);
``--cpu-time`` times by the process's CPU time (``time.process_time``), which other load on a
shared machine changes less than wall time.
"""
from __future__ import annotations

import cProfile
import pstats
import time

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


TAPE_LAZY = f"{TAPE}, lazy"


def tape_lazy_functions(tape):
    """Tape's chain functions run inside ``tape.lazy()``, each computing its result's value
    (``FLAGS_lazy_fusion`` decides whether the 100-op chain is one loop)."""
    def lazily(fn):
        def run():
            with tape.lazy():
                out = fn()
                return out.value() if isinstance(out, tape.Variable) else out
        return run
    return tuple(lazily(fn) for fn in tape_functions(tape))


def check_gradients(results: dict) -> str:
    expected = np.full(SIZE, SCALE ** PAIRS, dtype=np.float32)
    bad = [lib for lib, grad in results.items()
           if not np.allclose(grad, expected, rtol=1e-5)]
    return ("gradients agree (all d loss/d x = 1.0001^50)" if not bad
            else f"WRONG gradient from: {', '.join(bad)}")


# --- the op mix ----------------------------------------------------------------------------

MIX_HIDDEN, MIX_BLOCKS = 32, 6
MIX_OPS = 16 * MIX_BLOCKS + 3


def mix_arrays(seed: int = 1):
    """``(state, params)``: x, h, c float32 (1, 32); W (64, 128), b (128,), V (32, 32), v (32,)
    float32, uniform in [-1/sqrt(fan in), 1/sqrt(fan in)]."""
    rng = np.random.default_rng(seed)
    hidden = MIX_HIDDEN
    state = tuple(rng.standard_normal((1, hidden)).astype(np.float32) for _ in range(3))
    params = tuple(rng.uniform(-1, 1, shape).astype(np.float32) / np.float32(np.sqrt(fan_in))
                   for shape, fan_in in (((2 * hidden, 4 * hidden), 2 * hidden),
                                         ((4 * hidden,), 2 * hidden),
                                         ((hidden, hidden), hidden), ((hidden,), hidden)))
    return state, params


mix_state, mix_params = mix_arrays()


def _numpy_sigmoid(z):
    return 1 / (1 + np.exp(-z))


def numpy_mix_forward():
    """The mix in numpy: sigmoid and softmax take several numpy calls each."""
    (x, h, c), (w, b, v, bv) = mix_state, mix_params
    for _ in range(MIX_BLOCKS):
        i, f, g, o = np.split(np.concatenate([x, h], axis=1) @ w + b, 4, axis=1)
        c = _numpy_sigmoid(f) * c + _numpy_sigmoid(i) * np.tanh(g)
        h = _numpy_sigmoid(o) * np.tanh(c)
        x = np.maximum(h @ v + bv, 0)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True) * c).mean()


def torch_mix_functions(torch):
    x0, h0, c0 = (torch.from_numpy(a.copy()) for a in mix_state)
    params = [torch.from_numpy(a.copy()).requires_grad_(True) for a in mix_params]
    w, b, v, bv = params

    def mix():
        x, h, c = x0, h0, c0
        for _ in range(MIX_BLOCKS):
            i, f, g, o = (torch.cat([x, h], dim=1) @ w + b).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            x = torch.relu(h @ v + bv)
        return (torch.softmax(x, dim=1) * c).mean()

    def forward_backward():
        for p in params:
            p.grad = None
        mix().backward()
        return [p.grad.numpy() for p in params]

    def no_grad_forward():
        with torch.no_grad():
            return mix()

    return mix, forward_backward, no_grad_forward


def tape_mix_functions(tape):
    ops = tape.ops
    x0, h0, c0 = (tape.Variable(a.copy()) for a in mix_state)
    params = [tape.Variable(a.copy(), stop_gradient=False) for a in mix_params]
    w, b, v, bv = params

    def mix():
        tape.reset_global_tape()
        x, h, c = x0, h0, c0
        for _ in range(MIX_BLOCKS):
            i, f, g, o = ops.split(ops.concat([x, h], axis=1) @ w + b, num=4, axis=1)
            c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
            h = ops.sigmoid(o) * ops.tanh(c)
            x = ops.relu(h @ v + bv)
        return ops.mean(ops.softmax(x, axis=1) * c)

    def forward_backward():
        for p in params:
            p.grad = None
        mix().backward()
        return [p.grad.value() for p in params]

    def no_grad_forward():
        with tape.no_grad():
            return mix()

    return mix, forward_backward, no_grad_forward


def check_mix_gradients(results: dict) -> str:
    """Tape's gradients of W, b, V, v against PyTorch's (rtol 1e-4 of each one's largest)."""
    if TAPE not in results or TORCH not in results:
        return "mix: gradients not compared (needs both Tape and PyTorch)"
    wrong = [name for name, ours, theirs in zip("WbVv", results[TAPE], results[TORCH])
             if not np.allclose(ours, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())]
    return ("mix: gradients agree with PyTorch's (W, b, V, v)" if not wrong
            else f"mix: WRONG gradient of {', '.join(wrong)} from Tape vs PyTorch")


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


def time_per_op(functions: dict, ops: int, options: dict) -> list:
    """``[forward, forward + backward, no_grad forward]``, each ``{library: µs per op}``, of
    ``functions`` = ``{library: (forward, forward_backward or None, no_grad_forward)}``."""
    seconds = [measure({lib: fns[i] for lib, fns in functions.items() if fns[i] is not None},
                       **options) for i in range(3)]
    return [{lib: t * 1e6 / ops for lib, t in s.items()} for s in seconds]


TABLE_TITLES = ("forward (recording for backward)", "forward + backward to the leaf",
                "forward under no_grad (numpy: same as forward)")


def print_tables(figures: list, notes: list) -> None:
    """The three tables of ``time_per_op``'s ``figures``; ``notes`` = one ``{library: note}``
    per table."""
    for title, by_library, table_notes in zip(TABLE_TITLES, figures, notes):
        rows = [(lib, by_library.get(lib), table_notes.get(lib))
                for lib in (NUMPY, TORCH, TAPE, TAPE_LAZY) if lib != TAPE_LAZY or lib in by_library]
        print_table(title, "µs per op", rows)


def main(argv=None):
    parser_args = parse_args(__doc__.splitlines()[0], argv, extra=[
        ("--profile", "add a cProfile of Tape's forward+backward (top 15 by tottime)"),
        ("--cpu-time", "time by the process's CPU time (time.process_time), not wall time")])
    # 32-element arrays and one-row products: no BLAS or OpenMP pool wakes, nothing to settle
    options = dict(timing_options(parser_args.quick), settle=0.0,
                   clock=time.process_time if parser_args.cpu_time else time.perf_counter)
    torch = import_torch()
    tape, tape_missing = import_tape_or_reason("ops.reduce_sum", "ops.scale", "ops.concat",
                                               "ops.split", "ops.softmax", "ops.mean")
    chain = {NUMPY: (numpy_forward, numpy_forward_backward, numpy_forward)}
    mix = {NUMPY: (numpy_mix_forward, None, numpy_mix_forward)}
    if torch is not None:
        chain[TORCH], mix[TORCH] = torch_functions(torch), torch_mix_functions(torch)
    if tape is not None:
        chain[TAPE], mix[TAPE] = tape_functions(tape), tape_mix_functions(tape)
        chain[TAPE_LAZY] = tape_lazy_functions(tape)
    with OtherLoad() as chain_load:
        chain_figures = time_per_op(chain, OPS, options)
    with OtherLoad() as mix_load:
        mix_figures = time_per_op(mix, MIX_OPS, options)
    chain_grads = {lib: fns[1]() for lib, fns in chain.items()}
    mix_grads = {lib: fns[1]() for lib, fns in mix.items() if fns[1] is not None}

    notes = {TORCH: None if torch else "torch not importable", TAPE: tape_missing}
    print(f"## Per-op overhead: {2 * PAIRS} elementwise ops + sum on float32[{SIZE}]\n")
    print(threads_report(torch))
    print(f"\nclock: {options['clock'].__name__}\n")
    print_tables(chain_figures, [notes] * 3)
    print()
    print_notes([(f"µs per op = time per iteration / {OPS} ops; Tape's iteration includes "
                  "tape.reset_global_tape()."),
                 "numpy backward is a hand-written reverse pass (one multiply per scale op).",
                 check_gradients(chain_grads), chain_load.note()])

    print(f"\n## Per-op overhead: an op mix, {MIX_BLOCKS} LSTM-cell-like blocks, hidden "
          f"{MIX_HIDDEN}, float32")
    no_backward = {**notes, NUMPY: "no hand-written backward"}
    print_tables(mix_figures, [notes, no_backward, notes])
    print()
    print_notes([(f"µs per op = time per iteration / {MIX_OPS} ops (concat, matmul, bias add, "
                  "split, sigmoid, tanh, relu, mul, add, softmax, mean); Tape's iteration "
                  "includes tape.reset_global_tape()."),
                 "numpy's sigmoid and softmax are several numpy calls each, counted as one op.",
                 check_mix_gradients(mix_grads), mix_load.note()])
    if parser_args.profile and tape is not None:
        profile_tape(chain[TAPE][1], 200 if parser_args.quick else 2000)

if __name__ == "__main__":
    main()
