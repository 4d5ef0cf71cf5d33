"""Traced control flow exported: save_inference_model writes the while / conditional_block
sub-blocks, Tape reloads them, and Paddle's predictor serves them, matching Tape at inputs that
take different trip counts and branches (and another batch size than the example's)."""
import json
import shutil

import numpy as np
from paddle_runner import needs_paddle, paddle_serve
from test_control_flow import loop_then_branch, python_loop_then_branch

import tape
from tape import layers

X = np.array([[0.5, -0.2, 0.9], [1.0, 0.3, -0.4]], np.float32)
# (x, n): 3 trips, 1 trip, and 0 trips on 5 rows each way (the mean's sign picks the branch)
INPUTS = [(X, 3), (-X, 1), (np.tile(0.3 * X, (3, 1))[:5], 0), (np.tile(-X, (3, 1))[:5], 0)]


def _saved(tmp_path):
    tape.seed(5)
    lin = layers.Linear(3, 3, act="tanh")
    program = tape.static.trace(loop_then_branch(lin), X, np.array([3]))
    tape.static.save_inference_model(tmp_path, program)
    return lin, tape.static.load_inference_model(tmp_path)


def test_traced_control_flow_saves_and_reloads(tmp_path):
    lin, program = _saved(tmp_path)
    assert len(program.desc.blocks) == 4
    assert all(op.attrs.get("is_test") for op in program.global_block().ops
               if op.type == "while")
    exe = tape.static.Executor()
    branches = set()
    for x, n in INPUTS:
        got = exe.run(program, {"input_0": x, "input_1": np.array([n])}, program.fetch_names)
        np.testing.assert_allclose(got[0], python_loop_then_branch(lin, x, n, branches),
                                   rtol=1e-6, atol=1e-6)
    assert branches == {True, False}


@needs_paddle
def test_paddle_serves_traced_control_flow(tmp_path):
    _, program = _saved(tmp_path / "model")
    exe = tape.static.Executor()
    dirs, ours = [], []
    for k, (x, n) in enumerate(INPUTS):
        d = tmp_path / f"input_{k}"
        d.mkdir()
        for name in ("model.pdmodel", "model.pdiparams"):
            shutil.copy(tmp_path / "model" / name, d)
        np.savez(d / "feeds.npz", x, np.array([n]))
        dirs.append(d)
        ours.append(exe.run(program, {"input_0": x, "input_1": np.array([n])},
                            program.fetch_names)[0])
    paddle_serve(dirs, modes=("default", "no_ir_optim"))
    for d, expected in zip(dirs, ours):
        report = json.loads((d / "paddle.json").read_text())
        assert report == {"default": "ok", "no_ir_optim": "ok"}, report
        for mode in report:
            np.testing.assert_allclose(np.load(d / f"{mode}.npz")["arr_0"], expected,
                                       rtol=1e-5, atol=1e-6)
