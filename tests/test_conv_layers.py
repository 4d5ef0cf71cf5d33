"""conv2d / pool2d beyond the generic op test (shape rules with -1, errors, Paddle's tie rule for
max pooling, the 2x2 fast path), the Conv2D / Pool2D layers, and the CNN digits example."""
import math
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from references.conv import conv2d as conv2d_reference
from references.pool import pool2d as pool2d_reference

import tape
from tape import dtypes, layers
from tape.context import InferShapeContext
from tape.desc import VarDesc
from tape.registry import op_info
from tape.testing import check_forward, check_grad, vjp

ROOT = pathlib.Path(__file__).resolve().parent.parent


def var(shape, dtype=np.float64):
    return tape.Variable(np.ones(shape, dtype))


def _infer(op_type, shapes, attrs):
    """The output shapes the op's shape rule gives for input ``shapes`` (-1 allowed)."""
    info = op_info(op_type)
    ins = {slot: [VarDesc(slot, shape, dtypes.FP32)] for slot, shape in shapes.items()}
    ctx = InferShapeContext(op_type, ins, info.check_attrs(attrs))
    info.infer_shape(ctx)
    return {slot: specs[0][0] for slot, specs in ctx.outs.items()}


# ---- shape rules ----

@pytest.mark.parametrize("x_shape, attrs, expected", [
    ((-1, 3, 8, 8), {"paddings": [1, 1]}, (-1, 4, 8, 8)),
    ((2, 3, -1, 9), {"strides": [2, 2]}, (2, 4, -1, 4)),
    ((2, 3, 7, 7), {"padding_algorithm": "SAME", "strides": [2, 3], "dilations": [2, 2]},
     (2, 4, 4, 3)),
    ((2, 3, 7, 7), {"padding_algorithm": "VALID", "paddings": [5, 5]}, (2, 4, 5, 5)),
    ((2, 3, 7, 7), {"paddings": [0, 2, 1, 0], "dilations": [2, 1]}, (2, 4, 5, 6)),
])
def test_conv2d_output_shape(x_shape, attrs, expected):
    assert _infer("conv2d", {"Input": x_shape, "Filter": (4, 3, 3, 3)}, attrs)["Output"] == expected


@pytest.mark.parametrize("x_shape, attrs, expected", [
    ((-1, 3, 8, 8), {"ksize": [2, 2], "strides": [2, 2]}, (-1, 3, 4, 4)),
    ((2, 3, 7, 7), {"ksize": [2, 2], "strides": [2, 2], "ceil_mode": True}, (2, 3, 4, 4)),
    ((2, 3, -1, 7), {"ksize": [3, 3], "global_pooling": True}, (2, 3, 1, 1)),
    ((2, 3, -1, 7), {"ksize": [3, 5], "adaptive": True}, (2, 3, 3, 5)),
    ((2, 3, 7, 5), {"ksize": [3, 3], "strides": [2, 2], "padding_algorithm": "SAME"},
     (2, 3, 4, 3)),
])
def test_pool2d_output_shape(x_shape, attrs, expected):
    attrs = {"pooling_type": "max", **attrs}
    assert _infer("pool2d", {"X": x_shape}, attrs)["Out"] == expected


ERRORS = [
    (lambda: tape.ops.conv2d(var((2, 3, 8, 8)), var((4, 2, 3, 3))),
     ["conv2d", "Input (2, 3, 8, 8) has 3 channels", "Filter (4, 2, 3, 3)", "groups=1",
      "Filter.shape[1] * groups = 2"]),
    (lambda: tape.ops.conv2d(var((2, 4, 8, 8)), var((3, 2, 3, 3)), groups=2),
     ["conv2d", "3 output channels", "groups=2"]),
    (lambda: tape.ops.conv2d(var((2, 3, 4, 8)), var((4, 3, 3, 3)), dilations=[2, 1]),
     ["conv2d", "Input height 4 padded to 4", "dilated height 5", "kernel 3, dilation 2"]),
    (lambda: tape.ops.conv2d(var((2, 3, 8)), var((4, 3, 3, 3))),
     ["conv2d", "input Input must be 4-D (N, C, H, W)", "(2, 3, 8)"]),
    (lambda: tape.ops.conv2d(var((2, 3, 8, 8)), var((4, 3, 3))),
     ["conv2d", "input Filter must be 4-D", "(4, 3, 3)"]),
    (lambda: tape.ops.conv2d(var((2, 8, 8, 3)), var((4, 2, 3, 3)), data_format="NHWC"),
     ["conv2d", "Input (2, 8, 8, 3) has 3 channels", "Filter (4, 2, 3, 3)"]),
    (lambda: tape.ops.conv2d(var((2, 3, 8, 8)), var((4, 3, 3, 3)), paddings=[1, 1, 1]),
     ["conv2d", "paddings=[1, 1, 1]", "2 values", "or 4", "received 3"]),
    (lambda: tape.ops.conv2d(var((2, 3, 8, 8)), var((4, 3, 3, 3)), strides=[1]),
     ["conv2d", "strides=[1]", "2 values (height, width)", "received 1"]),
    (lambda: tape.ops.conv2d(var((2, 3, 8, 8)), var((4, 3, 3, 3), np.float32)),
     ["conv2d", "Input and Filter", "same dtype", "float64 and float32"]),
    (lambda: tape.ops.pool2d(var((2, 3, 2, 8)), ksize=[3, 3], pooling_type="max"),
     ["pool2d", "X height 2 padded to 2", "ksize=3", "(2, 3, 2, 8)"]),
    (lambda: tape.ops.pool2d(var((2, 3, 8, 8)), ksize=[2, 2], pooling_type="avg",
                             data_format="NHWC"),
     ["pool2d", "data_format='NHWC' is not supported"]),
    (lambda: tape.ops.pool2d(var((2, 3, 8, 8)), ksize=[2, 2, 2], pooling_type="avg"),
     ["pool2d", "ksize=[2, 2, 2]", "2 values"]),
    (lambda: tape.ops.pool2d(var((2, 3, 8, 8)), ksize=[2, 2]),
     ["pool2d", "['pooling_type']", "no default"]),
]


@pytest.mark.parametrize("call, fragments", ERRORS, ids=[e[1][1] for e in ERRORS])
def test_bad_input_is_reported_before_any_kernel(call, fragments, forbid_kernels):
    forbid_kernels("conv2d")
    forbid_kernels("pool2d")
    with pytest.raises(tape.InvalidArgumentError) as error:
        call()
    for fragment in fragments:
        assert fragment in str(error.value), str(error.value)


# ---- pool2d: Paddle's tie rule, and the 2x2 loops against the general ones ----

@pytest.mark.parametrize("ksize, strides", [((2, 2), (2, 2)), ((2, 3), (1, 2))])
def test_max_pool_gradient_goes_to_the_first_maximum_of_a_tie(ksize, strides):
    x = np.zeros((1, 2, 4, 6))     # windows of equal zeros in channel 0, of equal 5s in 1
    x[0, 1, 1:3, 2:4] = 5.0
    attrs = {"ksize": list(ksize), "strides": list(strides), "pooling_type": "max"}
    out_shape = tape.ops.pool2d(tape.Variable(x), **attrs).shape
    _, grads = vjp("pool2d", {"X": x}, attrs, {"Out": np.ones(out_shape)})
    expected = np.zeros_like(x)
    for y in range(out_shape[2]):
        for q in range(out_shape[3]):
            r, c = y * strides[0], q * strides[1]
            window = x[0, :, r:r + ksize[0], c:c + ksize[1]].reshape(2, -1)
            for channel, k in enumerate(window.argmax(axis=1)):   # the row-major first max
                expected[0, channel, r + k // ksize[1], c + k % ksize[1]] += 1.0
    np.testing.assert_array_equal(grads["X"][0], expected)


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_pool_2x2_fast_path_matches_the_reference(pooling_type):
    x = np.random.default_rng(0).permutation(3 * 5 * 8 * 6).reshape(3, 5, 8, 6) * 0.01
    attrs = {"ksize": [2, 2], "strides": [2, 2], "pooling_type": pooling_type}
    for dtype in (np.float64, np.float32):
        check_forward("pool2d", {"X": x}, attrs, pool2d_reference, dtype)
    check_grad("pool2d", {"X": x}, attrs)


# ---- layers ----

def test_conv2d_layer_is_conv_plus_bias_then_act():
    conv = layers.Conv2D(3, 4, (3, 2), stride=(2, 1), padding=(1, 0, 2, 1), dilation=2,
                         groups=1, act="relu", dtype="float64")
    conv.b.value()[...] = np.linspace(-1, 1, 4)
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 7))
    y = conv(tape.Variable(x))
    expected = conv2d_reference(Input=x, Filter=conv.w.value(), strides=(2, 1),
                                paddings=(1, 0, 2, 1), dilations=(2, 2), groups=1,
                                padding_algorithm="EXPLICIT")
    expected = np.maximum(expected + conv.b.value()[:, None, None], 0)
    np.testing.assert_allclose(y.value(), expected, rtol=1e-12)
    ops = list(tape.get_global_tape())
    assert [op.type for op in ops] == ["conv2d", "elementwise_add", "relu"]
    assert ops[1].attrs["axis"] == 1


def test_conv2d_layer_parameters_and_initialisers():
    conv = layers.Conv2D(6, 200, 3, groups=2)
    w, b = conv.w.value(), conv.b.value()
    assert re.fullmatch(r"conv2d_\d+\.w_0", conv.w.name)
    assert conv.b.name == conv.w.name[:-3] + "b_0"
    assert conv.params() == [conv.w, conv.b]
    assert w.shape == (200, 3, 3, 3) and w.dtype == np.float32 and b.shape == (200,)
    limit = math.sqrt(6 / (3 * 9))                         # fan_in = C / groups * kh * kw
    assert np.all(np.abs(w) <= limit) and abs(w.std() - limit / math.sqrt(3)) < 0.03 * limit
    assert np.all(b == 0)
    no_bias = layers.Conv2D(1, 2, 1, bias=False)
    assert no_bias.params() == [no_bias.w]
    no_bias(var((1, 1, 2, 2), np.float32))
    assert [op.type for op in tape.get_global_tape()] == ["conv2d"]


@pytest.mark.parametrize("padding, side", [("same", 5), ("valid", 3), (1, 5), ((0, 0, 1, 1), 3)])
def test_conv2d_layer_padding_forms(padding, side):
    y = layers.Conv2D(2, 3, 3, padding=padding)(var((1, 2, 5, 5), np.float32))
    assert y.shape[2] == side


@pytest.mark.parametrize("make, message", [
    (lambda: layers.Conv2D(3, 4, 3, groups=2), "groups=2 must be >= 1 and divide"),
    (lambda: layers.Conv2D(3, 4, (3, 3, 3)), "kernel_size must be an int or a pair"),
    (lambda: layers.Conv2D(3, 4, 3, padding="full"), "padding must be 'same', 'valid'"),
    (lambda: layers.Conv2D(3, 4, 3, padding=1.5), "padding must be an int, 2 or 4 ints"),
    (lambda: layers.Conv2D(3, 4, 3, act="mul"), "act='mul'"),
    (lambda: layers.Conv2D(3, 4, 3)(var((2, 2, 5, 5), np.float32)),
     r"Conv2D: expected x of shape (N, 3, H, W), received (2, 2, 5, 5)"),
    (lambda: layers.Pool2D(2, pool_type="min"), "pool_type must be 'max' or 'avg'"),
    (lambda: layers.MaxPool2D(2)(var((2, 5, 5), np.float32)), "MaxPool2D: expected x of shape"),
])
def test_layers_reject_bad_arguments(make, message):
    with pytest.raises(tape.InvalidArgumentError) as error:
        make()
    assert message in str(error.value), str(error.value)


def test_pool_layers():
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 6))
    defaults = {"strides": (2, 2), "paddings": (0, 0), "global_pooling": False,
                "exclusive": True, "adaptive": False, "ceil_mode": False,
                "padding_algorithm": "EXPLICIT"}
    for layer, kind in [(layers.MaxPool2D(2), "max"), (layers.AvgPool2D(2), "avg"),
                        (layers.Pool2D(2, pool_type="avg"), "avg")]:
        np.testing.assert_allclose(layer(tape.Variable(x)).value(), pool2d_reference(
            X=x, ksize=(2, 2), pooling_type=kind, **defaults), rtol=1e-12)
    overlapping = layers.MaxPool2D(3, stride=1, padding=1)(tape.Variable(x))
    assert overlapping.shape == (2, 3, 6, 6)
    whole_window = layers.AvgPool2D(3, padding=1, exclusive=False)
    assert whole_window(var((1, 1, 3, 3))).value()[0, 0, 0, 0] == pytest.approx(4 / 9)
    pooled = layers.Pool2D(2, pool_type="avg", global_pooling=True)(tape.Variable(x))
    np.testing.assert_allclose(pooled.value(), x.mean(axis=(2, 3), keepdims=True), rtol=1e-12)
    assert layers.Pool2D(2).params() == []


# ---- the example ----

def test_cnn_digits_example_reaches_97_percent():
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "cnn_digits.py")],
                            capture_output=True, text=True, check=True, timeout=300)
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", result.stdout).group(1))
    assert accuracy >= 0.97
