"""Lazy fusion: per_op.py's 100-op chain (``y * 1.0001``, ``y + 0.0001``, 50 times, then a sum)
run inside ``tape.lazy()``, with FLAGS_lazy_fusion on and off, on float32 vectors of several
sizes:

- forward: the chain's value asked for;
- forward+backward: ``backward()`` of the sum and the leaf's gradient read, beside eager Tape
  and PyTorch (when installed) running the same;
- forward+backward of a chain whose gradients read forward values (``y = sqrt(y * y + 1) *
  0.5``, 25 times: 100 ops), where forward and backward become one loop.

"Fused" is fusion forced on at every size (``fusion_steps.MIN_ELEMENTS`` set to 0); by default
arrays below 8,192 elements are left unfused, so there the default runs at the "unfused" figure.
The figure is the minimum over the runs of one iteration's CPU time (``time.process_time``, so
that other load on the machine counts less), in µs; fused and unfused alternate twice. "µs per
op" divides a forward+backward iteration by the chain's 101 ops (forward and backward together,
as ``per_op.py`` counts them).

    .venv/bin/python benchmarks/lazy_fusion.py [--runs N]
"""
import argparse
import contextlib
import functools
import time

import numpy as np

import tape
from tape import fusion_steps

PAIRS = 50
OPS = 2 * PAIRS + 1
SIZES = (32, 4096, 16384, 262144)


def scale_chain(ops, y):
    for _ in range(PAIRS):
        y = y * 1.0001
        y = y + 0.0001
    return y


def reading_chain(ops, y):
    """Gradients that read forward values: sqrt_grad reads Out, square's (y * y) reads y."""
    for _ in range(PAIRS // 2):
        y = ops.sqrt(y * y + 1.0) * 0.5
    return y


def tape_forward(x, chain):
    with tape.lazy():
        tape.reset_global_tape()
        return chain(tape.ops, x).value()


def tape_backward(x, chain, lazy=True):
    with tape.lazy() if lazy else contextlib.nullcontext():
        tape.reset_global_tape()
        x.grad = None
        tape.ops.reduce_sum(chain(tape.ops, x), reduce_all=True).backward()
        return x.grad.value()


def torch_backward(torch, x, chain):
    x.grad = None
    chain(torch, x).sum().backward()
    return x.grad.numpy()


def fastest(fn, runs: int) -> float:
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best * 1e6


def fused_and_unfused(fn, runs: int) -> tuple:
    figures = {True: [], False: []}
    for fusion in (True, False, True, False):
        tape.set_flags({"FLAGS_lazy_fusion": fusion})
        figures[fusion].append(fastest(fn, runs))
    tape.set_flags({"FLAGS_lazy_fusion": True})
    return min(figures[True]), min(figures[False])


def import_torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    torch = import_torch()
    fusion_steps.MIN_ELEMENTS = 0
    data = {size: np.random.default_rng(0).standard_normal(size).astype(np.float32)
            for size in SIZES}

    print("Forward (value asked for)\n")
    print("| float32 elements | fused µs | unfused µs | unfused / fused |")
    print("| ---: | ---: | ---: | ---: |")
    for size in SIZES:
        x = tape.Variable(data[size])
        n = runs if size < 100_000 else max(runs // 10, 5)
        fused, unfused = fused_and_unfused(functools.partial(tape_forward, x, scale_chain), n)
        print(f"| {size} | {fused:.0f} | {unfused:.0f} | {unfused / fused:.2f}× |")

    for title, chain in (("the 100-op chain", scale_chain),
                         ("gradients reading forward values", reading_chain)):
        print(f"\nForward+backward, {title} (µs per iteration; µs per op in brackets)\n")
        print("| float32 elements | lazy fused | lazy unfused | eager Tape | PyTorch | "
              "unfused / fused | eager / fused |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for size in SIZES:
            x = tape.Variable(data[size], stop_gradient=False)
            n = runs if size < 100_000 else max(runs // 10, 5)
            fused, unfused = fused_and_unfused(functools.partial(tape_backward, x, chain), n)
            eager = fastest(functools.partial(tape_backward, x, chain, lazy=False), n)
            expected = tape_backward(x, chain, lazy=False)
            np.testing.assert_allclose(tape_backward(x, chain), expected, rtol=1e-5)
            peer = "not installed"
            if torch is not None:
                tx = torch.from_numpy(data[size].copy()).requires_grad_(True)
                np.testing.assert_allclose(torch_backward(torch, tx, chain), expected,
                                           rtol=1e-4)
                peer = fastest(functools.partial(torch_backward, torch, tx, chain), n)
                peer = f"{peer:.0f}"
            print(f"| {size} | {fused:.0f} ({fused / OPS:.2f}) | {unfused:.0f} "
                  f"({unfused / OPS:.2f}) | {eager:.0f} ({eager / OPS:.2f}) | {peer} | "
                  f"{unfused / fused:.2f}× | {eager / fused:.2f}× |")


if __name__ == "__main__":
    main()
