"""Start-up costs, each measured in fresh processes: import time, first and second training step.

    .venv/bin/python benchmarks/startup.py [--quick]

Import: ``import numpy`` alone; ``import torch`` and ``import tape`` as the time above an
already imported numpy. Steps: the small MLP of mlp.py (batch 64, 784-256-256-10) in a new
process. Tape's first step runs the kernels ``python -m tape.optim.compile_kernels`` compiled
ahead of time (``make`` builds them; kernels/aot.py), and compiles with numba, or loads from numba's
on-disk cache, any kernel call they do not cover; "JIT only" rows turn them off (TAPE_AOT=0).
Cold: NUMBA_CACHE_DIR is a new empty directory; warm: the directory a cold run filled.
Each figure is the median over several processes.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from harness import (
    NUMPY,
    TAPE,
    TORCH,
    OtherLoad,
    import_torch,
    parse_args,
    print_notes,
    print_table,
)

MODULES = {NUMPY: None, TORCH: "torch", TAPE: "tape"}
SMALL = (64, (784, 256, 256, 10))


def child_import(lib: str) -> dict:
    """Seconds to import numpy, then ``lib`` on top of it; whether numba came along."""
    start = time.perf_counter()
    import numpy  # noqa: F401
    after_numpy = time.perf_counter()
    if MODULES[lib]:
        __import__(MODULES[lib])
    end = time.perf_counter()
    return {"numpy": after_numpy - start, "above_numpy": end - after_numpy,
            "numba_imported": "numba" in sys.modules}


def child_steps(lib: str) -> dict:
    """Seconds for import, model build, first and second training step."""
    start = time.perf_counter()
    import numpy  # noqa: F401
    module = __import__(MODULES[lib]) if MODULES[lib] else None
    if lib == TAPE:
        from tape import layers, optim  # noqa: F401
    imported = time.perf_counter()
    import mlp
    problem = mlp.make_problem(*SMALL)
    if lib == NUMPY:
        step = mlp.numpy_step(*problem)
    elif lib == TORCH:
        step = mlp.torch_step(module, *problem)
    else:
        step = mlp.tape_step(module, *problem)
    built = time.perf_counter()
    step()
    first = time.perf_counter()
    step()
    second = time.perf_counter()
    return {"import": imported - start, "build": built - imported, "first": first - built,
            "second": second - first, "numba_imported": "numba" in sys.modules}


def run_child(kind: str, lib: str, env_extra: dict | None = None) -> dict:
    # Children cache bytecode as any Python install does (site-packages ship .pyc files; an
    # editable install writes them on first import): PYTHONDONTWRITEBYTECODE in this shell
    # would otherwise charge Tape's source compilation to every import.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, __file__, "--child", kind, lib], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} {lib} child failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.splitlines()[-1])


def median_of(results: list, key: str) -> float:
    return statistics.median(r[key] for r in results) * 1e3


def measure_imports(libs: list, repeats: int):
    rows, numba_flags = [], {}
    for lib in libs:
        results = [run_child("import", lib) for _ in range(repeats)]
        key = "numpy" if lib == NUMPY else "above_numpy"
        note = None if lib == NUMPY else "above numpy"
        rows.append((lib, median_of(results, key), note))
        numba_flags[lib] = any(r["numba_imported"] for r in results)
    return rows, numba_flags


def measure_steps(libs: list, repeats: int):
    """``({row label: [child results]}, None or why Tape did not run)``; Tape four times: with
    and without its ahead-of-time kernels, each with a cold and a warm numba cache."""
    runs = {}
    for lib in libs:
        if lib != TAPE:
            runs[lib] = [run_child("steps", lib) for _ in range(repeats)]
            continue
        for label, aot in (("", "1"), (", JIT only", "0")):
            cold, warm = [], []
            for _ in range(repeats):
                with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
                    env = {"NUMBA_CACHE_DIR": cache, "TAPE_AOT": aot}
                    try:
                        cold.append(run_child("steps", lib, env))
                    except RuntimeError as e:   # the library is still growing
                        return runs, str(e).strip().splitlines()[-1]
                    warm.append(run_child("steps", lib, env))
            runs[f"{TAPE}{label} (cold numba cache)"] = cold
            runs[f"{TAPE}{label} (warm numba cache)"] = warm
    return runs, None


def aot_note(runs: dict) -> str:
    from tape.kernels import aot
    built = os.path.exists(aot.manifest_path(aot.DIRECTORY, aot.source_key()))
    during = any(r["numba_imported"] for label, results in runs.items()
                 if label.startswith(TAPE) and "JIT only" not in label for r in results)
    return (f"ahead-of-time kernels for these sources: {'built' if built else 'NOT built'} "
            f"(python -m tape.optim.compile_kernels); numba imported during Tape's steps with "
            f"them: {'YES' if during else 'no'}")


def main(argv=None):
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--child":
        kind, lib = sys.argv[2], sys.argv[3]
        print(json.dumps((child_import if kind == "import" else child_steps)(lib)))
        return
    args = parse_args(__doc__.splitlines()[0], argv)
    import_repeats, step_repeats = (3, 1) if args.quick else (9, 5)
    libs = [NUMPY] + ([TORCH] if import_torch() else [])

    print("## Start-up: import time, first and second training step (fresh processes)\n")
    print(f"python {sys.version.split()[0]}; medians of {import_repeats} processes (imports) "
          f"and {step_repeats} (steps); thread defaults untouched")
    with OtherLoad() as load:
        rows, numba_flags = measure_imports(libs + [TAPE], import_repeats)
        runs, tape_problem = measure_steps(libs + [TAPE], step_repeats)
    print_table("import", "ms", rows)
    missing = [] if tape_problem is None else [(TAPE, None, f"did not run: {tape_problem}")]
    if TORCH not in libs:
        missing.append((TORCH, None, "torch not importable"))
    for title, keys in (("first training step (small MLP)", ("first",)),
                        ("second training step", ("second",)),
                        ("import + model build + first step", ("import", "build", "first"))):
        table = [(label, sum(median_of(results, k) for k in keys), None)
                 for label, results in runs.items()]
        print_table(title, "ms", table + missing)
    print()
    print_notes([f"small MLP: batch {SMALL[0]}, {'-'.join(map(str, SMALL[1]))}, as in mlp.py",
                 "import tape pulls in numba: " + ("YES" if numba_flags[TAPE] else "no"),
                 aot_note(runs),
                 "Python start-up itself (interpreter, site) is outside every figure; children "
                 "cache bytecode (PYTHONDONTWRITEBYTECODE is cleared), as an installed package "
                 "does.",
                 load.note()])


if __name__ == "__main__":
    main()
