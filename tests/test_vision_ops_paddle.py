"""The vision model zoo's ops (depthwise and transposed convolutions, group and instance norm,
interpolation, pad3d) against live PaddlePaddle: each op's generic-test cases, drawn from fixed
seeds, run by Paddle's own op (in a legacy program, one Paddle process for all) and by Tape's;
every output Paddle declares (the saved statistics too) and every input gradient must agree in
float64, but where PADDLE_BUGS says Paddle is wrong.

A case a listed bug hits may differ only in the gradients the entry names, while Paddle's
forward outputs still match Tape's; every entry must show on some case (else it is stale). The
generic test (tests/test_ops.py) checks Tape's gradients against central differences of Tape's
forward (and test_interp_gradient_is_the_adjoint_of_its_forward here, the interpolations' to
rounding), so a Paddle gradient that differs from Tape's differs from the derivative of
Paddle's own forward."""
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
from paddle_ops import needs_paddle, paddle_op_results

import tape.static as static
from tape import dtypes
from tape.registry import REGISTRY
from tape.testing import Draw, vjp

OPS = ["depthwise_conv2d", "conv2d_transpose", "depthwise_conv2d_transpose", "group_norm",
       "instance_norm", "bilinear_interp_v2", "nearest_interp_v2", "pad3d"]
SEEDS = range(12)
# float64 against Paddle's float64 kernels, which sum in other orders (and normalisation's
# gradients subtract nearly equal terms): relative to each array's largest value
RTOL = 1e-8

# (op, the cases it hits, the arrays Paddle gets wrong, what Paddle does)
PADDLE_BUGS = [
    ("group_norm", lambda ins, a: "Scale" not in ins, {"dX"},
     "without Scale, its group_norm_grad kernel computes X's gradient wrongly (it differs from "
     "the derivative of its own forward)"),
    ("instance_norm", lambda ins, a: ("Scale" in ins) != ("Bias" in ins), {"dScale", "dBias"},
     "its grad op writes Scale@GRAD and Bias@GRAD only when both Scale and Bias are given: "
     "with one of them the other's gradient is never computed (fetched as None)"),
    ("bilinear_interp_v2", lambda ins, a: a["align_mode"] == 0 and not a["align_corners"],
     {"dX"}, "its grad kernel computes the height's sampling position ratio * (k + 0.5) - 0.5 in "
     "float32 where its forward kernel computes it in double, so its weights differ from the "
     "forward's in the last float32 bits and its gradient is not the adjoint of its forward "
     "(~1e-7)"),
]


_IMAGES = np.random.default_rng(7).standard_normal((2, 3, 4, 5))
# the size inputs Paddle's programs use, which the registered cases (attributes only) leave out
GIVEN = {
    "bilinear_out_size": ("bilinear_interp_v2", {"X": _IMAGES, "OutSize": np.array(
        [7, 3], np.int32)}, {"align_corners": False, "align_mode": 0}),
    "bilinear_out_size_over_scale": ("bilinear_interp_v2", {"X": _IMAGES, "OutSize": np.array(
        [6, 9], np.int32), "Scale": np.array([1.3, 1.9], np.float32)}, {"align_corners": False}),
    "bilinear_scale_tensor_nhwc": ("bilinear_interp_v2", {"X": _IMAGES.transpose(0, 2, 3, 1),
                                                           "Scale": np.array([1.5], np.float32)},
                                   {"data_layout": "NHWC", "align_corners": False,
                                    "align_mode": 0}),
    "nearest_size_tensor": ("nearest_interp_v2", {"X": _IMAGES, "SizeTensor": [
        np.array([3], np.int32), np.array([8], np.int32)]},
        {"interp_method": "nearest", "align_corners": False}),
    "nearest_scale_attr_corners": ("nearest_interp_v2", {"X": _IMAGES},
                                   {"interp_method": "nearest", "scale": [1.7, 2.3]}),
    "nearest_same_size": ("nearest_interp_v2", {"X": _IMAGES},
                          {"interp_method": "nearest", "scale": [1.2, 1.1]}),
    "pad3d_paddings_tensor": ("pad3d", {"X": _IMAGES.reshape(2, 3, 1, 4, 5), "Paddings": np.array(
        [1, 4, 0, 3, 2, 0], np.int32)}, {"paddings": [0] * 6, "mode": "replicate"}),
    "pad3d_circular_twice_round": ("pad3d", {"X": _IMAGES.reshape(2, 4, 5, 3, 1)},
                                   {"paddings": [0, 3, 7, 3, 4, 2], "mode": "circular",
                                   "data_format": "NDHWC"}),
}


def _case(op_type, seed):
    """(inputs, every attribute, the output slots, the input slots to differentiate)."""
    info = REGISTRY[op_type]
    inputs, attrs = GIVEN[seed][1:] if seed in GIVEN else info.case(Draw.from_seed(seed))
    attrs = dict(info.check_attrs(attrs))
    if "epsilon" in attrs:   # Paddle holds it as a float32: compare the same epsilon
        attrs["epsilon"] = float(np.float32(attrs["epsilon"]))
    wrt = [s for s in info.input_names if s in inputs and s in info.grad.grads and
           dtypes.from_numpy(np.asarray(inputs[s]).dtype) in dtypes.FLOATING]
    return inputs, attrs, list(info.output_names), wrt


def _cotangent(op_type, seed, inputs, attrs):
    outputs, _ = vjp(op_type, inputs, attrs, {})
    first = REGISTRY[op_type].output_names[0]
    rng = np.random.default_rng(zlib.crc32(str(seed).encode()))
    return rng.standard_normal(outputs[first][0].value().shape)


CASES = [(op, seed) for op in OPS for seed in SEEDS] + [(op, name)
                                                          for name, (op, _, _) in GIVEN.items()]


@pytest.fixture(scope="module")
def paddle_results(tmp_path_factory):
    cases = {}
    for op_type, seed in CASES:
        inputs, attrs, outputs, wrt = _case(op_type, seed)
        cases[f"{op_type}-{seed}"] = (op_type, inputs, outputs, _paddle_attrs(attrs), wrt,
                                      _cotangent(op_type, seed, inputs, attrs))
    return paddle_op_results(tmp_path_factory.mktemp("paddle_vision"), cases)


def _paddle_attrs(attrs):
    """Attributes as Paddle's append_op takes them (lists, not tuples)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


def _outcome(paddle_results, op_type, seed):
    """({array: how Tape's and Paddle's differ}, [(arrays, reason) of the bugs it hits])."""
    inputs, attrs, output_slots, wrt = _case(op_type, seed)
    cotangent = _cotangent(op_type, seed, inputs, attrs)
    outputs, grads = vjp(op_type, inputs, attrs, {output_slots[0]: cotangent})
    want = paddle_results[f"{op_type}-{seed}"]
    got = {slot: outputs[slot][0].value() for slot in output_slots if outputs.get(slot)}
    got.update({"d" + slot: grads[slot][0] for slot in wrt})
    wrong = {}
    for name, value in got.items():
        paddle = want.get(name)
        if paddle is None or paddle.shape != value.shape:
            wrong[name] = f"Paddle gives {None if paddle is None else paddle.shape}, Tape " \
                          f"{value.shape}"
            continue
        scale = max(1.0, float(np.abs(paddle).max(initial=0)))
        if not np.allclose(value, paddle, rtol=RTOL, atol=RTOL * scale):
            wrong[name] = f"largest difference {np.abs(value - paddle).max():.3g} " \
                          f"(scale {scale:.3g})"
    return wrong, [(arrays, reason) for op, hits, arrays, reason in PADDLE_BUGS
                   if op == op_type and hits(inputs, attrs)]


@needs_paddle
@pytest.mark.parametrize("op_type,seed", CASES)
def test_matches_paddle(paddle_results, op_type, seed):
    wrong, bugs = _outcome(paddle_results, op_type, seed)
    if not (wrong and bugs):
        assert not wrong, f"{op_type}-{seed} {_case(op_type, seed)[1]}: {wrong}"
        return
    ((arrays, reason),) = bugs
    assert set(wrong) <= arrays, f"{op_type}-{seed}: differs beyond the listed Paddle bug " \
                                 f"({reason}): {wrong}"
    pytest.xfail(f"{op_type}: Paddle's bug: {reason}")


@needs_paddle
def test_every_listed_paddle_bug_shows(paddle_results):
    shown = {reason for op_type, seed in CASES
             for wrong, bugs in [_outcome(paddle_results, op_type, seed)] if wrong
             for _, reason in bugs}
    stale = [reason for _, _, _, reason in PADDLE_BUGS if reason not in shown]
    assert not stale, f"listed Paddle bugs that no case shows: {stale}"


@pytest.mark.parametrize("name", sorted(GIVEN))
def test_interp_gradient_is_the_adjoint_of_its_forward(name):
    """<Out(x), c> = <x, dX(c)> to rounding: the resizing is linear, and its gradient must be
    its exact transpose (which the finite differences of the generic test resolve only to
    ~1e-6)."""
    op_type, inputs, attrs = GIVEN[name]
    cotangent = _cotangent(op_type, name, inputs, attrs)
    outputs, grads = vjp(op_type, inputs, attrs, {"Out": cotangent})
    forward = np.vdot(outputs["Out"][0].value(), cotangent)
    np.testing.assert_allclose(np.vdot(inputs["X"], grads["X"][0]), forward, rtol=1e-13)


_PADDLE_MODEL = """
    import os, sys
    os.environ["FLAGS_enable_pir_api"] = "0"
    import numpy as np, paddle
    import paddle.nn as nn, paddle.nn.functional as F
    paddle.enable_static()
    paddle.seed(0)
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, 4, 6, 6], "float32")
        h = F.relu(nn.GroupNorm(2, 8)(nn.Conv2D(4, 8, 3, padding=1, groups=4)(x)))
        h = nn.Conv2DTranspose(8, 8, 3, stride=2, padding=1, groups=8)(h, output_size=[12, 12])
        # Paddle declares InstanceNorm2D's SavedMean (N * C,) as (-8,) with N unknown
        h = nn.Conv2DTranspose(8, 3, 3, padding=1)(nn.InstanceNorm2D(8)(h))
        h = nn.Upsample(size=[10, 7])(nn.Upsample(scale_factor=1.5, mode="bilinear")(h))
        y = F.pad(h, [1, 2, 0, 1], mode="reflect")
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    paddle.static.save_inference_model(sys.argv[1] + "/model", [x], [y], exe, program=main)
    rng, io = np.random.default_rng(0), {}
    for batch in (2, 1):
        io[f"x{batch}"] = rng.standard_normal((batch, 4, 6, 6)).astype(np.float32)
        io[f"y{batch}"] = exe.run(main, feed={"x": io[f"x{batch}"]}, fetch_list=[y])[0]
    np.savez(sys.argv[1] + "/io.npz", **io)
    print(" ".join(sorted({op.type for op in main.global_block().ops})))
"""


@needs_paddle
def test_tape_runs_a_model_paddle_built_from_these_ops(tmp_path):
    """Paddle's own layers (depthwise Conv2D, GroupNorm, InstanceNorm2D, Conv2DTranspose
    depthwise and not,
    Upsample bilinear and nearest, F.pad reflect), saved by Paddle; Tape's Executor runs the
    loaded model at two batch sizes within 1e-5 of Paddle."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_PADDLE_MODEL), tmp_path],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GLOG_minloglevel": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [
        "bilinear_interp_v2", "conv2d_transpose", "depthwise_conv2d",
        "depthwise_conv2d_transpose", "elementwise_add", "group_norm", "instance_norm",
        "nearest_interp_v2",
        "pad3d", "relu", "reshape2", "squeeze2", "unsqueeze2"]
    program = static.load_inference_model(str(tmp_path))
    io = np.load(tmp_path / "io.npz")
    for batch in (2, 1):
        (out,) = static.Executor().run(program, {program.feed_names[0]: io[f"x{batch}"]},
                                       program.fetch_names)
        want = io[f"y{batch}"]
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
