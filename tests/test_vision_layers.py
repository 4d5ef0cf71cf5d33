"""The vision layers and functions over the model zoo's ops: Conv2D's depthwise op,
Conv2DTranspose, GroupNorm, InstanceNorm2D, Upsample; F.conv2d_transpose, F.group_norm,
F.instance_norm, F.interpolate (with sizes given as tensors, eagerly and in a traced program);
and the ops' shape errors before any kernel."""
import numpy as np
import pytest
from references.conv import conv2d as conv2d_reference
from references.interp import bilinear_interp_v2 as interp_reference
from references.norm import group_norm as group_norm_reference

import tape
import tape.static as static
from tape import Variable, layers
from tape import functional as F

RNG = np.random.default_rng(3)
IMAGES = RNG.standard_normal((2, 4, 5, 6))


def _recorded(fn, *args):
    """The op types ``fn`` records when traced."""
    program = static.trace(fn, *args)
    return [op.type for op in program.global_block().ops if op.type not in ("feed", "fetch")]


@pytest.mark.parametrize("in_channels, out_channels, groups, op", [
    (4, 4, 4, "depthwise_conv2d"), (4, 8, 4, "depthwise_conv2d"), (4, 6, 2, "conv2d"),
    (1, 3, 1, "conv2d"), (4, 4, 1, "conv2d")])
def test_conv2d_layer_records_the_op_paddle_emits(in_channels, out_channels, groups, op):
    """Paddle's Conv2D emits depthwise_conv2d when groups = C > 1 and C divides M (measured
    with paddle.nn.Conv2D 3.3.1); both compute the grouped convolution."""
    tape.seed(0)
    conv = layers.Conv2D(in_channels, out_channels, 3, padding=1, groups=groups,
                         dtype="float64")
    x = RNG.standard_normal((2, in_channels, 5, 5))
    assert _recorded(conv, x)[0] == op
    y = conv(Variable(x)).value()
    want = conv2d_reference(x, conv.w.value(), (1, 1), (1, 1), (1, 1), groups, "EXPLICIT")
    np.testing.assert_allclose(y, want, rtol=1e-12)


def test_conv2d_transpose_is_the_adjoint_of_conv2d():
    """<conv2d(y, w), x> = <y, conv2d_transpose(x, w)>, strides, dilations and groups
    included."""
    w = RNG.standard_normal((6, 2, 3, 2))
    y = RNG.standard_normal((2, 4, 9, 8))
    options = {"stride": 2, "padding": (1, 0), "dilation": (1, 2), "groups": 2}
    out = F.conv2d(Variable(y), w, **options).value()
    x = RNG.standard_normal(out.shape)
    back = F.conv2d_transpose(Variable(x), w, output_size=y.shape[2:], **options).value()
    np.testing.assert_allclose(np.vdot(out, x), np.vdot(y, back), rtol=1e-12)


@pytest.mark.parametrize("in_channels, out_channels, groups, op", [
    (4, 4, 4, "depthwise_conv2d_transpose"), (4, 8, 4, "conv2d_transpose"),
    (1, 1, 1, "conv2d_transpose"), (4, 6, 2, "conv2d_transpose")])
def test_conv2d_transpose_layer(in_channels, out_channels, groups, op):
    tape.seed(1)
    up = layers.Conv2DTranspose(in_channels, out_channels, 3, stride=2, padding=1,
                                output_padding=1, groups=groups)
    x = RNG.standard_normal((2, in_channels, 4, 5)).astype(np.float32)
    assert _recorded(up, x)[:2] == [op, "elementwise_add"]
    assert up.w.shape == (in_channels, out_channels // groups, 3, 3)
    y = up(Variable(x))
    assert y.shape == (2, out_channels, 8, 10)      # (4 - 1) * 2 - 2 + 3 + 1
    assert up(Variable(x), output_size=(7, 9)).shape == (2, out_channels, 7, 9)
    y.sum().backward()
    # each bias gets the 2 * 8 * 10 ones of its output channel
    assert up.w.grad is not None and up.b.grad.value().tolist() == [160.0] * out_channels


def test_group_norm_and_instance_norm_layers():
    gn, inorm = layers.GroupNorm(2, 4, dtype="float64"), layers.InstanceNorm2D(4,
                                                                               dtype="float64")
    assert gn.params() == [gn.weight, gn.bias] and inorm.params() == [inorm.weight, inorm.bias]
    np.testing.assert_allclose(gn(Variable(IMAGES)).value(),
                               group_norm_reference(IMAGES, 1e-5, 2, "NCHW"), rtol=1e-12)
    np.testing.assert_allclose(inorm(Variable(IMAGES)).value(),
                               group_norm_reference(IMAGES, 1e-5, 4, "NCHW"), rtol=1e-12)
    channels_last = layers.GroupNorm(2, 6, data_format="NHWC", dtype="float64")
    np.testing.assert_allclose(channels_last(Variable(IMAGES)).value(),
                               group_norm_reference(IMAGES, 1e-5, 2, "NHWC"), rtol=1e-12)
    assert _recorded(gn, IMAGES) == ["group_norm"]
    assert _recorded(inorm, IMAGES) == ["instance_norm"]


def test_functional_norms():
    weight, bias = RNG.standard_normal(4), RNG.standard_normal(4)
    got = F.group_norm(Variable(IMAGES), 2, weight=weight, bias=bias).value()
    np.testing.assert_allclose(got, group_norm_reference(IMAGES, 1e-5, 2, "NCHW", weight, bias),
                               rtol=1e-12)
    got = F.instance_norm(Variable(IMAGES), weight=weight, bias=bias, eps=1e-3).value()
    np.testing.assert_allclose(got, group_norm_reference(IMAGES, 1e-3, 4, "NCHW", weight, bias),
                               rtol=1e-12)
    with pytest.raises(tape.InvalidArgumentError, match="instance_norm: .*running_mean=True"):
        F.instance_norm(Variable(IMAGES), running_mean=Variable(np.zeros(4)))


def _bilinear(x, h, w):
    return interp_reference(x, "NCHW", h, w, (), "bilinear", False, 0)


@pytest.mark.parametrize("size", [
    [7, 3], np.array([7, 3], np.int32), [np.array([7], np.int32), 3]])
def test_interpolate_sizes_as_ints_or_tensors(size):
    """Sizes as ints, as one int tensor or with a tensor among them give the same result and
    gradient (eagerly the tensors are read at once: see the traced program below for the
    OutSize input)."""
    if isinstance(size, np.ndarray):
        size = Variable(size)
    elif isinstance(size[0], np.ndarray):
        size = [Variable(size[0]), size[1]]
    x = Variable(IMAGES, stop_gradient=False)
    y = F.interpolate(x, size=size, mode="bilinear", align_mode=0)
    np.testing.assert_allclose(y.value(), _bilinear(IMAGES, 7, 3), rtol=1e-12)
    y.sum().backward()
    reference_grad = Variable(IMAGES, stop_gradient=False)
    F.interpolate(reference_grad, size=[7, 3], mode="bilinear", align_mode=0).sum().backward()
    np.testing.assert_allclose(x.grad.value(), reference_grad.grad.value(), rtol=1e-12)


def test_interpolate_scales_and_upsample():
    x = Variable(IMAGES)
    assert F.interpolate(x, scale_factor=2).shape == (2, 4, 10, 12)
    assert F.interpolate(x, scale_factor=[1.5, 0.5], mode="bilinear").shape == (2, 4, 7, 3)
    by_tensor = F.interpolate(x, scale_factor=Variable(np.array([2.0], np.float32)))
    np.testing.assert_array_equal(by_tensor.value(), F.interpolate(x, scale_factor=2).value())
    nearest = layers.Upsample(scale_factor=2)(x).value()
    np.testing.assert_array_equal(nearest, IMAGES.repeat(2, axis=2).repeat(2, axis=3))
    assert _recorded(layers.Upsample(size=(3, 3), mode="bilinear"), IMAGES) == \
        ["bilinear_interp_v2"]
    with pytest.raises(tape.InvalidArgumentError, match="align_corners only with bilinear"):
        F.interpolate(x, scale_factor=2, align_corners=True)


def test_a_traced_program_takes_the_output_size_from_a_feed():
    """The static Executor reads OutSize at run time: one program, any size."""
    program = static.trace(lambda x, size: F.interpolate(x, size=size, mode="bilinear"),
                           IMAGES, np.array([3, 4], np.int32))
    (op,) = [op for op in program.global_block().ops if op.type == "bilinear_interp_v2"]
    assert op.inputs["OutSize"] == [program.feed_names[1]]
    executor = static.Executor()
    for h, w in ((3, 4), (9, 2)):
        (out,) = executor.run(program, dict(zip(program.feed_names, [IMAGES, np.array(
            [h, w], np.int32)])), program.fetch_names)
        np.testing.assert_allclose(out, interp_reference(IMAGES, "NCHW", h, w, (), "bilinear",
                                                         False, 0), rtol=1e-12)


@pytest.mark.parametrize("call, fragments", [
    (lambda: tape.ops.depthwise_conv2d(Variable(IMAGES), Variable(np.ones((4, 1, 3, 3))),
                                       groups=2),
     ["depthwise_conv2d", "groups=2", "4 channels"]),
    (lambda: tape.ops.conv2d_transpose(Variable(IMAGES), Variable(np.ones((4, 2, 3, 3))),
                                       strides=[2, 2], output_size=[20, 13]),
     ["conv2d_transpose", "output_size=[20, 13]", "height 20", "[11, 13)"]),
    (lambda: tape.ops.conv2d_transpose(Variable(IMAGES), Variable(np.ones((3, 2, 3, 3)))),
     ["conv2d_transpose", "4 channels", "Filter.shape[0] = 3"]),
    (lambda: tape.ops.group_norm(Variable(IMAGES), groups=3),
     ["group_norm", "groups=3", "divide the 4 channels"]),
    (lambda: tape.ops.group_norm(Variable(IMAGES)), ["group_norm", "groups=-1", ">= 1"]),
    (lambda: tape.ops.bilinear_interp_v2(Variable(IMAGES), scale=[0.1, 1.0]),
     ["bilinear_interp_v2", "output height is 0", "expected > 0"]),
    (lambda: tape.ops.bilinear_interp_v2(Variable(IMAGES), Variable(np.array([9, 3], np.int32)),
                                         None, Variable(np.array([1.3, 1.9], np.float32)),
                                         align_corners=False),
     ["bilinear_interp_v2", "output cell 8 of 9 reads input cell 6", "past the input's 5"]),
    (lambda: tape.ops.pad3d(Variable(IMAGES.reshape(2, 4, 1, 5, 6)), paddings=[0, 6, 0, 0, 0, 0],
                            mode="reflect"),
     ["pad3d", "reflect", "axis W of size 6", "(0, 6)", "< 6"]),
    (lambda: tape.ops.pad3d(Variable(IMAGES.reshape(2, 4, 1, 5, 6)),
                            Variable(np.array([0, 0, 0, 5, 0, 0], np.int32)), paddings=[],
                            mode="reflect"),
     ["pad3d", "Paddings", "axis H of size 5", "(0, 5)"]),
])
def test_bad_inputs_are_errors_naming_the_op(call, fragments):
    with pytest.raises(tape.InvalidArgumentError) as error:
        call()
    for fragment in fragments:
        assert fragment in str(error.value), str(error.value)
