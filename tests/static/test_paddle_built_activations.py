"""A model that Paddle builds with its own nn layers and tensor functions, saved in the legacy
format, runs in Tape's Executor as in Paddle: the ops relu6, hard_swish, hard_sigmoid, swish,
silu, mish, prelu (all and channel), elu, selu, expand_v2, tile, cumsum, index_select and
argsort, with the attributes and slots Paddle writes for them."""
import numpy as np
from paddle_runner import needs_paddle, run_paddle

from tape import static

_BUILD = """
    import sys, numpy as np, paddle
    import paddle.nn.functional as F
    paddle.enable_static()
    paddle.seed(0)
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 3, 4], "float32")
        index = paddle.static.data("index", [3], "int64")
        h = paddle.nn.Linear(4, 4)(x)
        acts = [F.relu6(h * 4), F.hardswish(h * 4), F.hardsigmoid(h * 4), F.swish(h),
                F.silu(h), F.mish(h), paddle.nn.PReLU(3, 0.1)(h), paddle.nn.PReLU()(h),
                F.elu(h, 0.5), F.selu(h)]
        y = paddle.add_n(acts)                                    # (N, 3, 4)
        y = paddle.unsqueeze(y, 1)
        y = paddle.expand(y, [-1, 2, 3, 4]) + paddle.tile(y, [1, 2, 1, 1])   # (N, 2, 3, 4)
        y = paddle.cumsum(y, axis=-1)
        y = paddle.index_select(y, index, axis=3)
        out = y + paddle.argsort(y, axis=2, descending=True).astype("float32")
        # flattened: Paddle declares the running sums' shape (-18,), N * 18 with N unknown
        total = paddle.cumsum(out)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    feed = np.random.default_rng(0).standard_normal((5, 3, 4)).astype("float32")
    picks = np.array([2, 0, -1])
    want, want_total = exe.run(main, feed={"x": feed, "index": picks}, fetch_list=[out, total])
    paddle.static.save_inference_model(sys.argv[1] + "/model", [x, index], [out, total], exe,
                                       program=main)
    np.savez(sys.argv[1] + "/io.npz", x=feed, index=picks, out=want, total=want_total)
"""


@needs_paddle
def test_paddle_built_model_runs_in_tape(tmp_path):
    run_paddle(_BUILD, tmp_path)
    io = np.load(tmp_path / "io.npz")
    program = static.load_inference_model(tmp_path)
    types = {op.type for op in program.desc.global_block().ops}
    assert {"relu6", "hard_swish", "hard_sigmoid", "swish", "silu", "mish", "prelu", "elu",
            "selu", "expand_v2", "tile", "cumsum", "index_select", "argsort"} <= types, types
    got, total = static.Executor().run(program, {"x": io["x"], "index": io["index"]},
                                       program.fetch_names)
    np.testing.assert_allclose(got, io["out"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total, io["total"], rtol=1e-5, atol=1e-4)
