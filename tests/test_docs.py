"""The README's training loop and its "Adding an op" recipe run as written, and ``import tape``
stays light."""
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np

import tape
from tape import ops
from tape.attribute import FLOAT, Attr
from tape.ops.rules import float_same_as
from tape.registry import GradOp, kernel, register_op
from tape.testing import check_grad

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _readme_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_training_loop_runs_and_learns():
    loop = _readme_blocks()[0]
    scope = {}
    exec(compile(loop, "README.md", "exec"), scope)
    x_np, y_np = scope["x_np"], scope["y_np"]
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
    tape.reset_global_tape()
    with tape.no_grad():
        eager = scope["l2"](scope["l1"](tape.Variable(scope["x_np"]))).value()
    np.testing.assert_allclose(scope["probs"], eager, rtol=1e-6, atol=1e-6)
    assert (tmp_path / "build" / "model" / "model.pdmodel").is_file()


def test_readme_coming_from_section_runs_its_tape_step_and_learns():
    """The Tape block of "Coming from DyNet / PyTorch / Paddle", run as written."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Coming from DyNet"):]
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S)
                if b.startswith("# Tape")]
    scope = {}
    generator = tape.random.generator()
    state = generator.bit_generator.state    # later tests draw what they drew without this one
    try:
        exec(compile(block, "README.md", "exec"), scope)
    finally:
        generator.bit_generator.state = state
    assert scope["loss"].shape == () and scope["loss"].item() < 0.5


def test_readme_recipe_for_a_new_op_works(user_ops):
    """The "Adding an op" snippets, run as written, give an op that passes the gradient
    checker."""
    readme = (ROOT / "README.md").read_text()
    recipe = readme[readme.index("## Adding an op"):]
    scope = {"register_op": register_op, "Attr": Attr, "FLOAT": FLOAT,
             "float_same_as": float_same_as, "GradOp": GradOp, "kernel": kernel, "np": np}
    for block in re.findall(r"```python\n(.*?)```", recipe, re.S)[:2]:
        exec(compile(textwrap.dedent(block), "README.md", "exec"), scope)
    x = np.random.default_rng(0).standard_normal((3, 4))
    check_grad("stanh", {"X": x}, {"scale_a": 2.0})
    y = ops.stanh(tape.Variable(x), scale_a=2.0)
    np.testing.assert_allclose(y.value(), 1.7159 * np.tanh(2.0 * x))


def test_import_tape_neither_imports_numba_nor_compiles():
    code = ("import sys, tape; import tape.testing; "
            "print('numba' in sys.modules, 'hypothesis' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]
