"""Shared benchmark plumbing: timing, thread report, optional peers, markdown tables.

The scripts beside this file import it by name (``python benchmarks/<script>.py`` puts this
folder on ``sys.path``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

NUMPY = "numpy"
TORCH = "PyTorch"
TAPE = "Tape"


def parse_args(description: str, argv=None, extra=()) -> argparse.Namespace:
    """``--quick`` plus ``extra`` = ``[(flag, help)]`` boolean flags."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: few, short repeats (figures are rough)")
    for flag, text in extra:
        parser.add_argument(flag, action="store_true", help=text)
    return parser.parse_args(argv)


def import_torch():
    """``torch``, or None when it is not importable (its column is then skipped with a note)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def import_tape_or_reason(*names: str):
    """``(tape, None)``, or ``(None, reason)`` when tape or one of ``names`` is still missing.

    ``names`` are dotted attributes of the tape module that a benchmark needs, e.g.
    ``"ops.reduce_sum"`` or ``"layers.Linear"``.
    """
    try:
        import tape
        from tape import layers, optim  # noqa: F401  (makes tape.layers / tape.optim resolvable)
    except ImportError as e:
        return None, f"import tape failed: {e}"
    missing = []
    for name in names:
        obj = tape
        for part in name.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            missing.append(f"tape.{name}")
    if missing:
        return None, "not yet in the library: " + ", ".join(missing)
    return tape, None


def threads_report(torch=None) -> str:
    """One line: the BLAS / OpenMP thread pools numpy and torch will use (defaults untouched)."""
    parts = [f"cores={os.cpu_count()}"]
    env = [f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                            "MKL_NUM_THREADS") if k in os.environ]
    parts.append("env: " + (", ".join(env) if env else "no thread variables set"))
    try:
        from threadpoolctl import threadpool_info
        pools = [f"{p['internal_api']} {p.get('version') or ''} threads={p['num_threads']}"
                 .replace("  ", " ") for p in threadpool_info()]
        parts.append("pools: " + "; ".join(pools))
    except ImportError:
        parts.append("numpy BLAS threads: unknown (threadpoolctl not installed)")
    if torch is not None:
        parts.append(f"torch {torch.__version__}: intra-op threads={torch.get_num_threads()}, "
                     f"inter-op threads={torch.get_num_interop_threads()}")
    return " | ".join(parts)


def _busy_seconds():
    """CPU seconds the whole machine has been busy (Linux /proc/stat), or None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    idle = fields[3] + fields[4]            # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """Context manager: how many cores other processes kept busy while it was open.

    A busy neighbour ruins multi-threaded BLAS timings (its spinning workers wait for a
    preempted peer), so every script reports this beside its figures. ``pids``: child
    processes still running that the benchmark runs peers in; their CPU time is its own.
    """

    def __init__(self, pids=()):
        self._pids = tuple(pids)

    def __enter__(self):
        self._wall, self._busy, self._own = time.perf_counter(), _busy_seconds(), self._mine()
        return self

    def __exit__(self, *exc):
        busy = _busy_seconds()
        wall = time.perf_counter() - self._wall
        self.cores = (None if busy is None or self._busy is None else
                      max(0.0, busy - self._busy - (self._mine() - self._own)) / wall)

    def _mine(self) -> float:
        return _own_seconds() + sum(_process_seconds(pid) for pid in self._pids)

    def note(self) -> str:
        if self.cores is None:
            return "load from other processes: unknown (no /proc/stat)"
        return (f"other processes kept {self.cores:.2f} of {os.cpu_count()} cores busy during "
                f"the measurement" + (" — figures are unreliable" if self.cores > 0.2 else ""))


def _process_seconds(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far (Linux /proc), 0 elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()   # after the command's name
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _calibrate(fn, target: float, clock) -> int:
    """Calls per repeat so that one repeat lasts about ``target`` seconds."""
    number = 1
    while True:
        elapsed = _seconds_per_call(fn, number, clock) * number
        if elapsed >= target / 4 or number >= 1 << 20:
            return max(1, round(number * target / max(elapsed, 1e-9)))
        number *= 4


def measure(fns: dict, *, repeats: int = 7, target: float = 0.2, warmup: int = 3,
            settle: float = 0.3, clock=time.perf_counter) -> dict:
    """``{name: median seconds per call}`` of the zero-argument callables ``fns``.

    Each gets ``warmup`` calls, then ``repeats`` timed batches of as many calls as fit in about
    ``target`` seconds. The batches of the different callables alternate, so a burst of load
    from elsewhere on the machine hits them all alike, with a ``settle`` pause between them:
    after a call, OpenBLAS worker threads keep spinning for about 0.1 s, which would steal a
    core from the next library's threads. The garbage collector stays on, as in a user's loop.
    ``clock``: ``time.perf_counter`` (wall time) or ``time.process_time`` (the CPU time of the
    process, which other load on the machine changes less).
    """
    numbers = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        numbers[name] = _calibrate(fn, target, clock)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            number = numbers[name]
            if len(fns) > 1:
                time.sleep(settle)
            times[name].append(_seconds_per_call(fn, number, clock))
    return {name: statistics.median(t) for name, t in times.items()}


def _seconds_per_call(fn, number: int, clock) -> float:
    """Mean seconds of ``number`` calls of ``fn`` on ``clock``; a callable with a
    ``seconds_per_call(number, clock)`` method (a peer in another process, which times itself)
    is asked instead."""
    timed = getattr(fn, "seconds_per_call", None)
    if timed is not None:
        return timed(number, clock)
    start = clock()
    for _ in range(number):
        fn()
    return (clock() - start) / number


CPU_TIME = ("--cpu-time", "time by the process's CPU time (time.process_time), not wall time")


def timing_options(quick: bool, cpu_time: bool = False) -> dict:
    """``measure``'s options: short repeats when ``quick``; the process's CPU time as the clock
    when ``cpu_time`` (other load on a shared machine changes it less than wall time)."""
    options = {"repeats": 3, "target": 0.03, "warmup": 2, "settle": 0.05} if quick else {}
    if cpu_time:
        options["clock"] = time.process_time
    return options


def clock_note(options: dict) -> str:
    """One line naming the clock ``options`` time by."""
    if options.get("clock") is time.process_time:
        return "clock: process_time (CPU time of the process)"
    return "clock: perf_counter (wall time; --cpu-time for CPU time)"


def _ratio(value, base) -> str:
    if value is None or base is None:
        return "—"
    return f"{value / base:.2f}×"


def print_table(title: str, unit: str, rows: list, baselines=(NUMPY, TORCH),
                digits: int = 2) -> None:
    """Markdown table of ``rows`` = ``[(library, value or None, note)]`` with ratios.

    A ratio is value / baseline value (above 1: slower or bigger than the baseline). A row whose
    value is None shows its note instead of a figure.
    """
    base = {lib: value for lib, value, _ in rows if value is not None}
    print(f"\n### {title}\n")
    header = ["library", unit] + [f"vs {b}" for b in baselines]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |")
    for lib, value, note in rows:
        if value is None:
            cells = [lib, f"— ({note})"] + ["—"] * len(baselines)
        else:
            figure = f"{value:.{digits}f}" + (f" ({note})" if note else "")
            cells = [lib, figure] + [_ratio(value, base.get(b)) for b in baselines]
        print("| " + " | ".join(cells) + " |")


def print_notes(notes: list) -> None:
    for note in notes:
        print(f"- {note}")
