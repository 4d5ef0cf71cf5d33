"""Fused loops are compiled once per machine, not once per process (``kernels/fused.py``): a
later process loads them from the disk cache, and a cache file that is damaged, foreign or made
for another numba or CPU is rebuilt, never trusted or crashed on.

Each process below is a new Python running one lazy forward + backward per dtype (float32,
float64: one fused loop each) with ``TAPE_FUSED_CACHE_DIR`` a temporary directory, and numba's
index of the loops in its ``__pycache__`` (``NUMBA_CACHE_DIR`` unset for it)."""
import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tape
from tape import fusion_steps, ops
from tape.kernels import fused

CHILD = textwrap.dedent("""
    import contextlib, json, sys
    import numpy as np
    import tape
    from tape import fusion_steps, ops
    from tape.kernels import fused
    fusion_steps.MIN_ELEMENTS = 0   # (small arrays fuse too)

    def run(dtype, lazy):
        x = tape.Variable(np.linspace(-2, 2, 12).astype(dtype).reshape(3, 4),
                          stop_gradient=False)
        with tape.lazy() if lazy else contextlib.nullcontext():
            tape.reset_global_tape()
            y = ops.relu(x * 1.5 + 0.25) - x * 0.5
            ops.reduce_sum(ops.square(y), reduce_all=True).backward()
            return [y.numpy().tobytes().hex(), x.grad.numpy().tobytes().hex()]

    dtypes = sys.argv[1:]
    print(json.dumps({"lazy": [run(d, True) for d in dtypes],
                      "eager": [run(d, False) for d in dtypes],
                      "compiled": fused.compilations, "loaded": fused.cache_loads}))
""")
DTYPES = ("float32", "float64")


def run_process(cache, dtypes=DTYPES, **env) -> dict:
    """The child's report (and its stderr) after a run in a new process."""
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    environment.update(TAPE_FUSED_CACHE_DIR=str(cache), **env)
    out = subprocess.run([sys.executable, "-c", CHILD, *dtypes], env=environment,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    report["stderr"] = out.stderr
    return report


def loop_files(cache) -> dict:
    """``{dtype: (source, numba's index, numba's data files)}`` of the loops in ``cache``."""
    found = {}
    for source in cache.glob("fused_*.py"):
        dtype = next(d for d in DTYPES if f"np.{d}(" in source.read_text())
        index, = cache.glob(f"__pycache__/{source.stem}.*.nbi")
        found[dtype] = (source, index, sorted(cache.glob(f"__pycache__/{source.stem}.*.nbc")))
    return found


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache directory a first process filled, and that process's report."""
    directory = tmp_path_factory.mktemp("fused_cache")
    return directory, run_process(directory)


def test_a_second_process_compiles_nothing(cache):
    directory, first = cache
    assert (first["compiled"], first["loaded"]) == (2, 0)
    assert first["lazy"] == first["eager"]      # bit for bit, both dtypes
    files = loop_files(directory)
    assert sorted(files) == list(DTYPES)
    for source, _, data in files.values():
        assert source.read_text().startswith("# A fused loop of kernels/fused.py") and data
    second = run_process(directory)
    assert (second["compiled"], second["loaded"]) == (0, 2)
    assert second["lazy"] == first["lazy"] and "did not load" not in second["stderr"]


def test_damaged_or_foreign_cache_files_are_rebuilt(cache):
    directory, first = cache
    files = loop_files(directory)
    source32, index32, _ = files["float32"]
    source64, index64, _ = files["float64"]
    ours = source32.read_text()
    # a source file holding other code (never run: it would end the process), an index of
    # garbage
    source32.write_text('raise SystemExit("the cached file ran")\n' + ours.replace("*", "+"))
    index64.write_bytes(b"not an index")
    report = run_process(directory)
    assert (report["compiled"], report["loaded"]) == (1, 1)     # float64 compiled again
    assert report["lazy"] == first["lazy"] and source32.read_text() == ours
    assert report["stderr"].count("did not load") == 1 and source64.stem in report["stderr"]
    # a truncated data file; an index another numba version wrote (numba ignores it)
    _, _, data64 = loop_files(directory)["float64"]
    data64[0].write_bytes(data64[0].read_bytes()[:100])
    with open(index32, "rb") as f:
        pickle.load(f)
        rest = f.read()
    index32.write_bytes(pickle.dumps("0.0.0-another-numba") + rest)
    report = run_process(directory)
    assert (report["compiled"], report["loaded"]) == (2, 0)
    assert report["lazy"] == first["lazy"] and report["stderr"].count("did not load") == 1
    report = run_process(directory)
    assert (report["compiled"], report["loaded"]) == (0, 2) and report["lazy"] == first["lazy"]


def test_another_cpu_compiles_its_own_loop(cache):
    """numba keys its index by the CPU name and features too: a loop compiled for this CPU is
    not run on another."""
    directory, first = cache
    generic = run_process(directory, ("float32",), NUMBA_CPU_NAME="generic")
    assert (generic["compiled"], generic["loaded"]) == (1, 0)
    assert generic["lazy"] == first["lazy"][:1]


def test_the_cache_directory_follows_numbas_order(monkeypatch, tmp_path):
    def chosen(**env):
        for name in ("TAPE_FUSED_CACHE_DIR", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, str(value))
        monkeypatch.setattr(fused, "_directory", None)
        return fused.cache_directory()
    assert chosen(TAPE_FUSED_CACHE_DIR=tmp_path / "t", NUMBA_CACHE_DIR=tmp_path / "n") == \
        str(tmp_path / "t")
    assert chosen(NUMBA_CACHE_DIR=tmp_path / "n") == str(tmp_path / "n" / "tape_fused")
    in_tree = os.path.join(os.path.dirname(fused.__file__), "__pycache__", "tape_fused")
    assert chosen() == in_tree
    blocked = tmp_path / "a file"
    blocked.write_text("")      # (no directory can be made below a file)
    monkeypatch.setattr(fused, "_candidates",
                        lambda: iter([str(blocked / "x"), str(tmp_path / "user")]))
    assert chosen() == str(tmp_path / "user")
    monkeypatch.setattr(fused, "_candidates", lambda: iter([str(blocked / "x")]))
    assert chosen() is None


def test_without_a_writable_directory_loops_compile_in_memory(monkeypatch):
    monkeypatch.setattr(fused, "_directory", fused._NO_DIRECTORY)
    monkeypatch.setattr(fused, "_loops", {})
    monkeypatch.setattr(fusion_steps, "MIN_ELEMENTS", 0)
    compiled, loaded = fused.compilations, fused.cache_loads
    x = np.linspace(-1, 1, 6).astype(np.float32)
    with tape.lazy():
        got = ops.sqrt(ops.square(tape.Variable(x) * 3.0) + 1.0).numpy()
    np.testing.assert_array_equal(got, ops.sqrt(ops.square(tape.Variable(x) * 3.0) + 1.0).numpy())
    assert (fused.compilations, fused.cache_loads) == (compiled + 1, loaded)
    loop, = fused._loops.values()
    assert loop.py_func.__code__.co_filename.startswith("<fused group")   # (no file)


def test_a_compile_error_is_raised_as_it_is(monkeypatch, tmp_path):
    """Only a cache entry that fails to load is compiled again; a loop numba cannot compile
    fails with numba's error."""
    monkeypatch.setattr(fused, "_directory", str(tmp_path))
    monkeypatch.setattr(fused, "_loops", {})
    program = ((("no_such_formula", (("in", 0),), 0, ()),), (("v", 0),))
    a = np.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "did not load" warning)
        with pytest.raises(AttributeError, match="no attribute 'no_such_formula'"):
            fused.run_group(program, np.float64, [a], [np.empty(3)], np.empty(0))
