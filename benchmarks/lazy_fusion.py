"""Lazy fusion: per_op.py's 100-op chain (``y * 1.0001``, ``y + 0.0001``, 50 times) run inside
``tape.lazy()`` with its value asked for, with FLAGS_lazy_fusion on and off, on float32 vectors
of several sizes. The figure is the minimum over the runs of one iteration, in µs (the minimum,
so that other load on the machine counts less; on and off alternate twice).

    .venv/bin/python benchmarks/lazy_fusion.py [--runs N]
"""
import argparse
import time

import numpy as np

import tape

PAIRS = 50
SIZES = (32, 4096, 262144)


def chain(x):
    with tape.lazy():
        tape.reset_global_tape()
        y = x
        for _ in range(PAIRS):
            y = y * 1.0001
            y = y + 0.0001
        return y.value()


def fastest(x, runs: int) -> float:
    for _ in range(3):
        chain(x)
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        chain(x)
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    print("| float32 elements | fused µs | unfused µs | unfused / fused |")
    print("| ---: | ---: | ---: | ---: |")
    for size in SIZES:
        x = tape.Variable(np.random.default_rng(0).standard_normal(size).astype(np.float32))
        n = runs if size < 100_000 else max(runs // 10, 5)
        figures = {True: [], False: []}
        for fusion in (True, False, True, False):
            tape.set_flags({"FLAGS_lazy_fusion": fusion})
            figures[fusion].append(fastest(x, n))
        fused, unfused = min(figures[True]), min(figures[False])
        print(f"| {size} | {fused:.0f} | {unfused:.0f} | {unfused / fused:.2f}× |")
    tape.set_flags({"FLAGS_lazy_fusion": True})


if __name__ == "__main__":
    main()
