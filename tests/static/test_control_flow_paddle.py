"""Programs with ``while`` and ``cond`` that Paddle builds (``paddle.static.nn.while_loop`` /
``cond``, with a tensor array and an fc layer in the loop, and a counter stepped by ``j + 1``),
saved in the legacy format, run in Tape's Executor with Paddle's answers, at inputs that take
different trip counts and branches."""
import numpy as np
import pytest
from paddle_runner import needs_paddle, run_paddle

import tape

_BUILD = """
    import sys, numpy as np, paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    paddle.seed(7)

    def logical_not(x, name=None):
        # Paddle 3.3.1's paddle.logical_not takes the PIR path even in legacy mode, which cond
        # calls: the same op, appended as its legacy implementation would
        helper = LayerHelper("logical_not")
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
        helper.append_op(type="logical_not", inputs={"X": [x]}, outputs={"Out": [out]})
        return out

    paddle.logical_not = logical_not
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 3], "float32")
        n = paddle.static.data("n", [1], "int64")
        i = paddle.full([1], 0, "int64")
        states = paddle.tensor.create_array("float32")

        def body(i, s):
            s = paddle.static.nn.fc(s, 3, activation="tanh")
            paddle.tensor.array_write(s, i, array=states)
            return [paddle.increment(i), s]

        i_end, s_end = paddle.static.nn.while_loop(lambda i, s: i < n, body, [i, x])
        first = paddle.tensor.array_read(states, paddle.full([1], 0, "int64"))
        length = paddle.tensor.array_length(states)
        out = paddle.static.nn.cond(paddle.mean(s_end) > 0.0, lambda: s_end - 1.0,
                                    lambda: s_end * 3.0)
        # the other counter idiom: `j + 1`, which Paddle writes as scale on int64
        _, doubled = paddle.static.nn.while_loop(lambda j, a: j < n, lambda j, a: [j + 1, a * 2.0],
                                                 [paddle.full([1], 0, "int64"), x])
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    d = sys.argv[1]
    paddle.static.save_inference_model(d + "/model", [x, n], [out, first, length, doubled], exe,
                                       program=main)
    feeds = np.load(d + "/feeds.npz")
    results = {}
    for k in range(2):   # each in a fresh scope: Paddle's arrays outlive a run in its scope
        with paddle.static.scope_guard(paddle.static.Scope()):
            model, _, fetches = paddle.static.load_inference_model(d + "/model", exe)
            got = exe.run(model, feed={"x": feeds[f"x{k}"], "n": feeds[f"n{k}"]},
                          fetch_list=fetches)
        results.update({f"{k}_{j}": v for j, v in enumerate(got)})
    np.savez(d + "/paddle.npz", **results)
"""


@needs_paddle
def test_paddle_built_while_and_cond_run_in_tape(tmp_path):
    x = np.array([[0.5, -0.2, 0.9], [1.0, 0.3, -0.4]], np.float32)
    feeds = {"x0": x, "n0": np.array([3], np.int64), "x1": -x, "n1": np.array([1], np.int64),
             "x2": x, "n2": np.array([0], np.int64)}
    np.savez(tmp_path / "feeds.npz", **feeds)
    run_paddle(_BUILD, tmp_path)
    paddle = np.load(tmp_path / "paddle.npz")
    program = tape.static.load_inference_model(tmp_path)
    ops = {op.type for b in program.desc.blocks for op in b.ops}
    dtype_of = {v.name: v.dtype for b in program.desc.blocks for v in b.vars.values()}
    int_scales = [op for b in program.desc.blocks for op in b.ops
                  if op.type == "scale" and dtype_of[op.inputs["X"][0]] == tape.dtypes.INT64]
    assert int_scales, "the `j + 1` loop should hold a scale op on int64"
    assert {"while", "conditional_block", "select_input", "write_to_array", "read_from_array",
            "lod_array_length", "increment", "logical_not"} <= ops
    exe = tape.static.Executor()
    branches = set()
    for k in range(2):
        got = exe.run(program, {"x": feeds[f"x{k}"], "n": feeds[f"n{k}"]}, program.fetch_names)
        for j, value in enumerate(got):
            np.testing.assert_allclose(value, paddle[f"{k}_{j}"], rtol=1e-5, atol=1e-6)
        branches.add(bool(got[0][0, 0] < got[1][0, 0]))   # which branch: s - 1 or s * 3
    assert len(branches) == 2, "the two inputs should take different branches"
    assert exe.last_run_ops.count("conditional_block") == 2
    # zero iterations: the array stays empty, and reading it is a clear error
    with pytest.raises(tape.InvalidArgumentError, match="read_from_array: I is 0"):
        exe.run(program, {"x": x, "n": feeds["n2"]}, program.fetch_names)
