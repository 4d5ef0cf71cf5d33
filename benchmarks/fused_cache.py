"""A fresh process's first lazy iterations, with the fused loops' disk cache cold, then warm.

Each workload runs in two new processes one after the other, both with ``TAPE_FUSED_CACHE_DIR``
set to one new empty directory (numba's cache of the other kernels is left as it is, warm after
any earlier run): the first compiles the fused loops it needs and leaves them in the directory,
the second finds them there. Printed per process: the wall time of each of the first ``--steps``
iterations (an iteration's first use of a kernel includes importing numba and loading it) and
how many fused loops the process compiled and loaded from the disk cache
(``kernels/fused.py``'s ``compilations`` and ``cache_loads``).

Workloads: ``chain`` (``per_op.py``'s 101-op chain, lazy forward + backward: its second
backward builds the cached program, whose loops join arrays of any size) and ``forest`` and
``lm_16`` (a lazy SGD step of ``dynamic.py``'s 16-tree Tree-LSTM and 16-sequence char LM).

    .venv/bin/python benchmarks/fused_cache.py [chain forest lm_16] [--steps 3]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("chain", "forest", "lm_16")


def iteration(which: str):
    """One lazy iteration of ``which`` (a function), made in this process."""
    if which == "chain":
        import per_op

        import tape
        return per_op.tape_lazy_functions(tape)[1]
    import lazy_steps
    return lazy_steps.training(which, warm_up=0)


def child(which: str, steps: int) -> None:
    step = iteration(which)
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    from tape.kernels import fused
    print(json.dumps({"seconds": seconds, "compiled": fused.compilations,
                      "loaded": getattr(fused, "cache_loads", 0)}))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS),
                        help=f"any of {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    if args.child:
        child(args.child, args.steps)
        return
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}: choose from {', '.join(WORKLOADS)}")
    for which in args.workloads:
        with tempfile.TemporaryDirectory(prefix="tape-fused-") as cache:
            for state in ("cold", "warm"):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", which, "--steps", str(args.steps)],
                    env={**os.environ, "TAPE_FUSED_CACHE_DIR": cache}, check=True,
                    capture_output=True, text=True)
                result = json.loads(out.stdout.strip().splitlines()[-1])
                times = ", ".join(f"{s * 1e3:,.0f}" for s in result["seconds"])
                print(f"{which}, {state} cache: first {args.steps} iterations {times} ms; fused "
                      f"loops compiled {result['compiled']}, loaded {result['loaded']}")


if __name__ == "__main__":
    main()
