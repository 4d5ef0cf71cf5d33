"""kernels/aot.py and aot_build.py: the ahead-of-time kernels run only on an exact type match,
give numba's JIT results bit for bit, spare the first training step numba's import, and a
module built for other sources is never loaded.

The module is the one ``make test`` built (``python -m tape.optim.compile_kernels``) when it fits
the current sources; otherwise the fixture builds one into a temporary directory (about half a
minute). Runs that may crash (a compiled function given a wrong type would) are subprocesses.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tape.kernels import aot, aot_build, jit
from tape.kernels.cpu import optimizer

KERNELS = Path(aot.__file__).parent


@pytest.fixture(scope="module")
def aot_dir(tmp_path_factory):
    """A directory holding the module built for the current sources."""
    if os.path.exists(aot.manifest_path(aot.DIRECTORY, aot.source_key())):
        return aot.DIRECTORY
    directory = str(tmp_path_factory.mktemp("aot"))
    subprocess.run([sys.executable, "-m", "tape.optim.compile_kernels"], check=True,
                   env={**os.environ, "TAPE_AOT_DIR": directory}, capture_output=True)
    return directory


def run_child(code: str, directory: str, use_aot: bool = True) -> dict:
    env = {**os.environ, "TAPE_AOT_DIR": directory, "TAPE_AOT": "1" if use_aot else "0"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


TRAIN = """
    import hashlib, json, sys
    from tape.optim import SGD, Adam, Momentum, compile_kernels
    from tape.kernels import aot
    first = compile_kernels.train_mlp(SGD(learning_rate=0.1), "float32", steps=1)
    numba_after_first_step = "numba" in sys.modules
    digests = {}
    for dtype in ("float32", "float64"):
        for opt in (SGD(learning_rate=0.1), Momentum(learning_rate=0.1), Adam()):
            params = compile_kernels.train_mlp(opt, dtype, steps=3)
            digests[f"{type(opt).__name__} {dtype}"] = hashlib.sha256(
                b"".join(p.numpy().tobytes() for p in params)).hexdigest()
    # softmax's row loops are compiled with fastmath reassoc (vectorised sums): at widths
    # around every vector length the compiled variants must add in the JIT's order
    import numpy as np
    from tape.kernels.cpu.activation import softmax_rows
    rows = hashlib.sha256()
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for width in range(1, 70):
            for log in (False, True):
                out, lse = softmax_rows(rng.standard_normal((3, width)).astype(dtype), log)
                rows.update(out.tobytes() + lse.tobytes())
    digests["softmax rows"] = rows.hexdigest()
    print(json.dumps({"numba_after_first_step": numba_after_first_step,
                      "numba_at_end": "numba" in sys.modules,
                      "variants": sum(map(len, aot._table.values())), "digests": digests}))
"""


def test_training_runs_without_numba_and_matches_the_jit_bit_for_bit(aot_dir):
    """Every optimizer and dtype of the workload, and softmax rows of widths 1-69."""
    compiled = run_child(TRAIN, aot_dir)
    jitted = run_child(TRAIN, aot_dir, use_aot=False)
    assert compiled["variants"] > 0 and jitted["variants"] == 0
    assert not compiled["numba_after_first_step"], "the small MLP's first step imported numba"
    assert not compiled["numba_at_end"]
    assert jitted["numba_after_first_step"]
    assert compiled["digests"] == jitted["digests"]


def test_a_call_of_another_type_goes_to_the_jit(aot_dir):
    """``_sgd_loop``'s variants take float32 arrays and a float32 rate (the workload's); each
    call below differs in one way and must run numba's JIT, with the JIT's result."""
    result = run_child("""
        import json, sys
        import numpy as np
        from tape.kernels import jit
        from tape.kernels.cpu.optimizer import _sgd_loop
        def arrays(dtype=np.float32, n=8):
            return np.linspace(1, 2, n, dtype=dtype), np.linspace(-1, 1, n, dtype=dtype)
        param, grad = arrays()
        _sgd_loop(param, grad, np.float32(0.5))
        exact_imported_numba = "numba" in sys.modules
        def readonly(a):
            a.flags.writeable = False
            return a
        calls = {
            "python float rate": lambda: (*arrays(), 0.5),
            "float64 rate": lambda: (*arrays(), np.float64(0.5)),
            "float64 arrays": lambda: (*arrays(np.float64), np.float32(0.5)),
            "mixed arrays": lambda: (arrays()[0], arrays(np.float64)[1], np.float32(0.5)),
            "strided param": lambda: (arrays(n=16)[0][::2], arrays()[1], np.float32(0.5)),
            "readonly grad": lambda: (arrays()[0], readonly(arrays()[1]), np.float32(0.5)),
            "python int rate": lambda: (*arrays(), 2),
        }
        reference = jit._compile(_sgd_loop.py_func, {})
        same = {}
        for name, make in calls.items():
            args, expected = make(), make()
            _sgd_loop(*args)
            reference(*expected)
            same[name] = args[0].tobytes() == expected[0].tobytes()
        print(json.dumps({"exact_imported_numba": exact_imported_numba, "same": same,
                          "numba_at_end": "numba" in sys.modules}))
    """, aot_dir)
    assert not result["exact_imported_numba"]
    assert result["numba_at_end"]
    assert all(result["same"].values()), result["same"]


def scalar_and_array_values():
    f4 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    readonly = np.ones(5)
    readonly.flags.writeable = False
    unaligned = np.frombuffer(bytearray(8 * 5 + 1), dtype=np.float64, offset=1, count=5)
    return [
        f4, f4[0], f4[:, 0], f4[0, 0], np.asfortranarray(f4), f4[..., ::2], f4.reshape(-1)[::3],
        np.ones((3, 1), np.float64), np.ones((1, 3), np.float64, order="F"),
        np.array(2.5, np.float32), np.zeros(0, np.int64), np.zeros((2, 0)), readonly, unaligned,
        np.arange(4, dtype=np.int32), np.ones(3, np.bool_), np.ones(3, np.complex64),
        np.ones(3, np.uint8), 0, 1, -1, 2**31, -(2**62), 2**63 - 1, 2**63, 2**64 - 1, 1.5,
        True, 1j, np.float32(1), np.float64(2), np.int32(3), np.int64(4), np.uint64(5),
        np.bool_(False), np.complex64(1j), (), (np.float32(1),), (1.0, 2), ((1, 2.0), f4),
    ]


def test_signature_keys_are_exactly_numbas_types():
    """A call's key matches the keys of a numba type only if numba types the argument so."""
    from numba.core.typing.typeof import typeof
    values = scalar_and_array_values()
    numba_types = {typeof(v) for v in values}
    for value in values:
        key = aot.signature((value,))
        matches = {t for t in numba_types
                   if aot.describe_type(t) is not None
                   and key in aot.keys_of_all([aot.describe_type(t)])}
        ordinary = not (type(value) is np.ndarray and not value.flags.aligned)
        assert matches == ({typeof(value)} if ordinary else set()), (value, matches)


def test_unsupported_arguments_match_nothing():
    for value in (None, "s", [1.0], 2**64, -(2**63), np.float16(1), np.ma.ones(3),
                  np.ones(3).view(np.recarray), np.longdouble(1)):
        assert aot.signature((value,)) == (None,), value


def test_the_key_follows_every_kernel_source_and_numba(tmp_path, monkeypatch):
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS, root, ignore=shutil.ignore_patterns("_aot", "__pycache__"))
    key = aot.source_key(str(root))
    assert aot.source_key(str(root)) == key
    for source in ("formulas.py", "jit.py", "cpu/loss.py"):
        original = (root / source).read_text()
        (root / source).write_text(original + "\n# edited\n")
        assert aot.source_key(str(root)) != key, source
        (root / source).write_text(original)
    assert aot.source_key(str(root)) == key
    real = aot._version_file
    monkeypatch.setattr(aot, "_version_file",
                        lambda package: b"another" if package == "numba" else real(package))
    assert aot.source_key(str(root)) != key


def test_a_module_built_for_other_sources_is_not_loaded(tmp_path, aot_dir):
    manifest = aot.manifest_path(aot_dir, aot.source_key())
    module = json.loads(Path(manifest).read_text())["file"]
    shutil.copy(manifest, aot.manifest_path(str(tmp_path), "0" * 24))
    shutil.copy(os.path.join(aot_dir, module), tmp_path / module)
    assert aot._load(str(tmp_path)) == {}
    assert aot._load(aot_dir), "the module for the current sources loads"


def sgd_workload():
    param, grad = np.ones(8, np.float32), np.full(8, 0.5, np.float32)
    optimizer._sgd_loop(param, grad, np.float32(0.1))


def test_a_variant_that_differs_from_the_jit_is_never_installed(tmp_path, monkeypatch):
    """The bit check runs each compiled variant against the JIT: one that differs is left out
    (here all are, so nothing is installed)."""
    class DoesNothing:
        def __getattr__(self, symbol):
            return lambda *args: None
    monkeypatch.setattr(aot_build, "_compile", lambda name, exports, directory: "unused")
    monkeypatch.setattr(aot, "load_module", lambda name, path: DoesNothing())
    log = []
    assert aot_build.build(sgd_workload, str(tmp_path), log.append) is None
    assert any("differs from the JIT" in line for line in log), log
    assert not [p for p in os.listdir(tmp_path) if p.startswith(aot.PREFIX)]


def test_a_failed_build_leaves_nothing_to_load(tmp_path, monkeypatch):
    def fails(name, exports, directory):
        Path(directory, name + ".so").write_bytes(b"half a module")
        raise RuntimeError("the C compiler failed")
    monkeypatch.setattr(aot_build, "_compile", fails)
    with pytest.raises(RuntimeError, match="C compiler"):
        aot_build.build(sgd_workload, str(tmp_path), lambda line: None)
    assert os.listdir(tmp_path) == []
    assert aot._load(str(tmp_path)) == {}


def test_a_rebuild_replaces_the_module_and_its_manifest_together(tmp_path, monkeypatch):
    """Each build's module has a new name that only its own manifest names (the old manifest
    never points into a new module); the rebuild removes the older module."""
    jitted = jit._compile(optimizer._sgd_loop.py_func, {})

    class LikeTheJit:
        def __getattr__(self, symbol):
            return jitted

    def writes_a_module(name, exports, directory):
        path = Path(directory, name + ".so")
        path.write_bytes(name.encode())
        return str(path)
    monkeypatch.setattr(aot_build, "_compile", writes_a_module)
    monkeypatch.setattr(aot, "load_module", lambda name, path: LikeTheJit())
    first, second = (json.loads(Path(aot_build.build(sgd_workload, str(tmp_path),
                                                     lambda line: None)).read_text())
                     for _ in range(2))
    assert first["file"] != second["file"]
    manifest = Path(aot.manifest_path(str(tmp_path), aot.source_key()))
    assert sorted(os.listdir(tmp_path)) == sorted([second["file"], manifest.name])
    assert (tmp_path / second["file"]).read_bytes() == second["module"].encode()


def test_the_build_leaves_the_kernels_as_it_found_them(monkeypatch):
    monkeypatch.setattr(aot_build, "_exports", lambda recorder, log: [])
    recording = []

    def workload():
        sgd_workload()
        recording.append(jit._recorder is not None)
    assert aot_build.build(workload, "unused", lambda line: None) is None
    assert recording == [True]
    assert jit._recorder is None
    assert optimizer._sgd_loop._compiled is None and optimizer._sgd_loop._aot is None


@pytest.mark.parametrize("manifest", ["not json", '{"module": "tape_aot_x"}',
                                      '{"module": "tape_aot_x", "file": "missing.so"}'])
def test_a_broken_manifest_warns_and_leaves_the_jit(tmp_path, manifest):
    Path(aot.manifest_path(str(tmp_path), aot.source_key())).write_text(manifest)
    with pytest.warns(RuntimeWarning, match="did not load"):
        assert aot._load(str(tmp_path)) == {}
