"""The README's training loop runs as written, and ``import tape`` stays light."""
import pathlib
import re
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _readme_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_training_loop_runs_and_learns():
    loop = _readme_blocks()[0]
    scope = {}
    exec(compile(loop, "README.md", "exec"), scope)
    x_np, y_np = scope["x_np"], scope["y_np"]
    import tape
    tape.reset_global_tape()
    with tape.no_grad():
        logits = scope["l2"](scope["l1"](tape.Variable(x_np))).value()
    assert float(scope["loss"].value()) < 0.5
    assert np.mean(logits.argmax(axis=1) == y_np[:, 0]) > 0.9


def test_readme_static_example_runs(tmp_path, monkeypatch):
    scope = {}
    exec(compile(_readme_blocks()[0], "README.md", "exec"), scope)
    monkeypatch.chdir(tmp_path)
    exec(compile(_readme_blocks()[1], "README.md", "exec"), scope)
    import tape
    tape.reset_global_tape()
    with tape.no_grad():
        eager = scope["l2"](scope["l1"](tape.Variable(scope["x_np"]))).value()
    np.testing.assert_allclose(scope["probs"], eager, rtol=1e-6, atol=1e-6)
    assert (tmp_path / "build" / "model" / "model.pdmodel").is_file()


def test_import_tape_neither_imports_numba_nor_compiles():
    code = ("import sys, tape; import tape.testing; "
            "print('numba' in sys.modules, 'hypothesis' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]
