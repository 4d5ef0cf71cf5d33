"""Converters of the network ops: pooling, normalisation, dropout, softmax and the
losses."""
from __future__ import annotations

import numpy as np

from ...geometry import pool_areas, pool_geometry, pool_windows
from ..table import NoOnnxMappingError, converts


def _known_sides(c, x, what: str) -> tuple:
    h, w = c.shape(x)[2:]
    if h < 0 or w < 0:
        raise NoOnnxMappingError(f"onnx export: op '{c.op.type}' needs the image sides of its "
                                 f"{what} known, has {c.shape(x)} (opset {c.opset})")
    return h, w


# ---- pool2d: Tape's windows (the kernel's own bounds), as ONNX pools, convs or products ----

@converts("pool2d")
def pool2d(c):
    """Global pooling as ONNX's global pools; windows (paddings, SAME, ceil mode, even adaptive
    ones) as MaxPool over the image padded with -inf, or as a depthwise Conv summing each
    window times 1 / the divisor Tape's kernel uses (exclusive or not); uneven adaptive windows
    as slices or a matrix product. The image sides must be known."""
    x, a = c.input("X"), c.attrs
    in_hw = _known_sides(c, x, "X")
    ksize, pads, out_hw = pool_geometry(in_hw, a["ksize"], a["strides"], a["paddings"],
                                        a["padding_algorithm"], a["global_pooling"],
                                        a["adaptive"], a["ceil_mode"])
    out = c.output("Out")
    is_max = a["pooling_type"] == "max"
    if a["global_pooling"] and not a["adaptive"]:
        c.node("GlobalMaxPool" if is_max else "GlobalAveragePool", [x], [out])
        return
    if a["adaptive"]:
        uniform = all(n % k == 0 for n, k in zip(in_hw, ksize))
        if not uniform:
            (_adaptive_max if is_max else _adaptive_avg)(c, x, in_hw, ksize, out)
            return
        window = tuple(n // k for n, k in zip(in_hw, ksize))
        ksize, strides, pads = window, window, (0, 0, 0, 0)
    else:
        strides = tuple(a["strides"])
    rows = pool_windows(in_hw[0], out_hw[0], ksize[0], strides[0], pads[0], a["adaptive"])
    cols = pool_windows(in_hw[1], out_hw[1], ksize[1], strides[1], pads[2], a["adaptive"])
    # pads that give every output cell a window: the bottom / right ones may grow (ceil mode),
    # and no more windows than Tape's fit
    full = [pads[0], pads[2],
            max(0, (out_hw[0] - 1) * strides[0] + ksize[0] - in_hw[0] - pads[0]),
            max(0, (out_hw[1] - 1) * strides[1] + ksize[1] - in_hw[1] - pads[2])]
    if is_max:
        padded = x
        if any(full):
            padded = c.node("Pad", [x, c.ints([0, 0, full[0], full[1], 0, 0, full[2], full[3]]),
                                    c.scalar_like(-np.inf, x)])
        pooled = c.node("MaxPool", [padded], kernel_shape=list(ksize), strides=list(strides))
    else:
        channels = c.shape(x)[1]
        ones = c.const(np.ones((channels, 1, *ksize), c.np_dtype(x)))
        sums = c.node("Conv", [x, ones], kernel_shape=list(ksize), strides=list(strides),
                      group=channels, pads=full)
        inverse = 1.0 / pool_areas(rows, cols, a["exclusive"], a["adaptive"])
        c.node("Mul", [sums, c.const(inverse.astype(c.np_dtype(x)))], [out])
        return
    c.identity(pooled, out)


def _adaptive_avg(c, x, in_hw, out_hw, out):
    """Uneven adaptive windows: X's pixels times a constant (H W, H_out W_out) matrix of
    1 / window size where a pixel is in a window."""
    rows = pool_windows(in_hw[0], out_hw[0], None, None, None, True)
    cols = pool_windows(in_hw[1], out_hw[1], None, None, None, True)
    weights = np.zeros((*in_hw, *out_hw))
    for y, (h0, h1) in enumerate(zip(*rows[:2])):
        for z, (w0, w1) in enumerate(zip(*cols[:2])):
            weights[h0:h1, w0:w1, y, z] = 1.0 / ((h1 - h0) * (w1 - w0))
    channels = c.shape(x)[1]
    flat = c.reshape(x, [-1, channels, in_hw[0] * in_hw[1]])
    matrix = c.const(weights.reshape(in_hw[0] * in_hw[1], -1).astype(c.np_dtype(x)))
    c.reshape(c.node("MatMul", [flat, matrix]), [-1, channels, *out_hw], out)


def _adaptive_max(c, x, in_hw, out_hw, out):
    """Uneven adaptive windows: the max of each window's slice, joined back into the image."""
    rows = pool_windows(in_hw[0], out_hw[0], None, None, None, True)
    cols = pool_windows(in_hw[1], out_hw[1], None, None, None, True)
    lines = []
    for h0, h1 in zip(*rows[:2]):
        cells = [c.reduce("ReduceMax", c.node("Slice", [x, c.ints([h0, w0]), c.ints([h1, w1]),
                                                        c.ints([2, 3])]), [2, 3], True)
                 for w0, w1 in zip(*cols[:2])]
        lines.append(c.node("Concat", cells, axis=3))
    c.node("Concat", lines, [out], axis=2)


# ---- normalisation ----

def _channel_shape(c, x, layout: str) -> list:
    """The shape a (C,) vector takes to broadcast over X's channel axis."""
    rank = c.rank(x)
    return [-1] + [1] * (rank - 2) if layout != "NHWC" else [-1]


@converts("batch_norm")
def batch_norm(c):
    """With the running statistics (what inference uses), or with batch statistics where
    trainable_statistics asks for them under is_test (and MeanOut / VarianceOut updated)."""
    x, a = c.input("X"), c.attrs
    rank, layout = c.rank(x), a["data_layout"]
    channel = 1 if layout != "NHWC" else rank - 1
    as_channels = _channel_shape(c, x, layout)
    global_stats = (a["is_test"] and not a["trainable_statistics"]) or a["use_global_stats"]
    mean, variance = c.input("Mean"), c.input("Variance")
    if global_stats:
        m, v = mean, variance
    else:
        axes = [i for i in range(rank) if i != channel]
        m = c.reduce("ReduceMean", x, axes, False)
        centered = c.node("Sub", [x, c.reshape(m, as_channels)])
        v = c.reduce("ReduceMean", c.node("Mul", [centered, centered]), axes, False)
    factor = c.node("Div", [c.input("Scale") if c.has_input("Scale") else
                            c.scalar_like(1.0, x),
                            c.node("Sqrt", [c.node("Add", [v, c.scalar_like(a["epsilon"], x)])])])
    y = c.node("Mul", [c.node("Sub", [x, c.reshape(m, as_channels)]),
                       c.reshape(factor, as_channels)])
    if c.has_input("Bias"):
        y = c.node("Add", [y, c.reshape(c.input("Bias"), as_channels)])
    c.identity(y, c.output("Y"))
    for slot, running, batch in (("MeanOut", mean, m), ("VarianceOut", variance, v)):
        if not c.wants(slot):
            continue
        if global_stats:
            c.identity(running, c.output(slot))
            continue
        momentum = c.node("Reshape", [c.input("MomentumTensor"), c.ints([])]) \
            if c.has_input("MomentumTensor") else c.scalar_like(a["momentum"], x)
        rest = c.node("Sub", [c.scalar_like(1.0, x), momentum])
        c.node("Add", [c.node("Mul", [running, momentum]), c.node("Mul", [batch, rest])],
               [c.output(slot)])


@converts("layer_norm")
def layer_norm(c):
    """Written out (ONNX's LayerNormalization needs opset 17, and computes the variance in a
    form that loses digits when the mean is large)."""
    x, a = c.input("X"), c.attrs
    rank, begin = c.rank(x), a["begin_norm_axis"]
    axes = list(range(begin, rank))
    centered = c.node("Sub", [x, c.reduce("ReduceMean", x, axes, True)])
    variance = c.reduce("ReduceMean", c.node("Mul", [centered, centered]), axes, True)
    y = c.node("Div", [centered, c.node("Sqrt", [c.node("Add", [
        variance, c.scalar_like(a["epsilon"], x)])])])
    rest = list(c.shape(x)[begin:])
    if c.has_input("Scale"):
        y = c.node("Mul", [y, c.reshape(c.input("Scale"), rest)])
    if c.has_input("Bias"):
        y = c.node("Add", [y, c.reshape(c.input("Bias"), rest)])
    c.identity(y, c.output("Y"))


def _group_normalised(c, groups: int, layout: str, mean_slot: str, variance_slot: str,
                      inverse_deviation: bool) -> None:
    """Y of X normalised per (sample, group of C / groups channels): X as (N, groups, rest),
    its mean and biased variance over the rest (two passes, as Tape's kernel), then Scale and
    Bias per channel; the statistics written to the wanted slots, flattened to the slots'
    shapes (the variance slot holds 1 / sqrt(variance + epsilon) with ``inverse_deviation``)."""
    x, a = c.input("X"), c.attrs
    shape = c.shape(x)
    if min(shape[1:]) < 0:
        raise NoOnnxMappingError(f"onnx export: op '{c.op.type}' needs the dims of X past the "
                                 f"batch known, has {list(shape)} (opset {c.opset})")
    rank = len(shape)
    images = c.node("Transpose", [x], perm=[0, rank - 1, *range(1, rank - 1)]) \
        if layout == "NHWC" else x
    channels = shape[-1] if layout == "NHWC" else shape[1]
    grouped = c.reshape(images, [-1, groups, int(np.prod(shape[1:])) // groups])
    mean = c.reduce("ReduceMean", grouped, [2], True)
    centered = c.node("Sub", [grouped, mean])
    variance = c.reduce("ReduceMean", c.node("Mul", [centered, centered]), [2], True)
    inverse = c.node("Reciprocal", [c.node("Sqrt", [
        c.node("Add", [variance, c.scalar_like(a["epsilon"], x)])])])
    nchw_shape = [-1, channels, *(shape[1:-1] if layout == "NHWC" else shape[2:])]
    y = c.reshape(c.node("Mul", [centered, inverse]), nchw_shape)
    as_channels = [-1] + [1] * (rank - 2)
    if c.has_input("Scale"):
        y = c.node("Mul", [y, c.reshape(c.input("Scale"), as_channels)])
    if c.has_input("Bias"):
        y = c.node("Add", [y, c.reshape(c.input("Bias"), as_channels)])
    if layout == "NHWC":
        y = c.node("Transpose", [y], perm=[0, *range(2, rank), 1])
    c.identity(y, c.output("Y"))
    for slot, value in ((mean_slot, mean),
                        (variance_slot, inverse if inverse_deviation else variance)):
        if c.wants(slot):
            c.reshape(value, c.shape(c.output(slot)), c.output(slot))


@converts("group_norm")
def group_norm(c):
    """Written out (ONNX's GroupNormalization needs opset 18, and scaled per group until 21)."""
    _group_normalised(c, c.attrs["groups"], c.attrs["data_layout"], "Mean", "Variance", False)


@converts("instance_norm")
def instance_norm(c):
    """group_norm with a group per channel; SavedVariance is 1 / sqrt(variance + epsilon), as
    Paddle saves it (ONNX's InstanceNormalization writes no statistics)."""
    x = c.input("X")
    _group_normalised(c, c.shape(x)[1], "NCHW", "SavedMean", "SavedVariance", True)


@converts("dropout")
def dropout(c):
    """Inference: nothing dropped; downgrade_in_infer scales by 1 - dropout_prob."""
    x, a = c.input("X"), c.attrs
    if a["dropout_implementation"] == "upscale_in_train":
        c.identity(x, c.output("Out"))
    else:
        c.node("Mul", [x, c.scalar_like(1.0 - a["dropout_prob"], x)], [c.output("Out")])


# ---- softmax and the losses ----

@converts("softmax")
def softmax(c):
    c.node("Softmax", [c.input("X")], [c.output("Out")], axis=c.attrs["axis"])


@converts("log_softmax")
def log_softmax(c):
    c.node("LogSoftmax", [c.input("X")], [c.output("Out")], axis=c.attrs["axis"])


def _picked_loss(c, log_p: str, label: str, axis: int, out: str) -> None:
    """-log_p at each hard label along ``axis`` (label has 1 there), 0 where the label is
    ignore_index."""
    label_type = c.np_dtype(c.input("Label"))
    loss_type = c.np_dtype(c.input("X" if c.has_input("X") else "Logits"))
    ignored = c.node("Equal", [label, c.scalar_like(c.attrs["ignore_index"], label_type)])
    safe = c.node("Where", [ignored, c.scalar_like(0, label_type), label])
    picked = c.node("GatherElements", [log_p, safe], axis=axis)
    c.node("Where", [ignored, c.scalar_like(0.0, loss_type), c.node("Neg", [picked])], [out])


def _soft_loss(c, log_p: str, label: str, axis: int, out: str) -> None:
    """-sum(label * log_p) along ``axis``, kept as a size-1 dim."""
    total = c.reduce("ReduceSum", c.node("Mul", [label, log_p]), [axis], True)
    c.node("Neg", [total], [out])


@converts("cross_entropy")
def cross_entropy(c):
    """On probabilities X along the last axis; hard labels may come without the trailing 1."""
    x, label = c.input("X"), c.input("Label")
    rank = c.rank(x)
    log_p = c.node("Log", [x])
    if c.attrs["soft_label"]:
        _soft_loss(c, log_p, label, rank - 1, c.output("Y"))
    elif c.rank(label) == rank - 1:
        picked = c.temp("loss")
        _picked_loss(c, log_p, c.unsqueeze(label, [rank - 1]), rank - 1, picked)
        c.squeeze(picked, [rank - 1], c.output("Y"))
    else:
        _picked_loss(c, log_p, label, rank - 1, c.output("Y"))


@converts("softmax_with_cross_entropy")
def softmax_with_cross_entropy(c):
    logits, label, a = c.input("Logits"), c.input("Label"), c.attrs
    axis = a["axis"] % c.rank(logits)
    if a["use_softmax"]:
        c.node("Softmax", [logits], [c.output("Softmax")], axis=axis)
        log_p = c.node("LogSoftmax", [logits], axis=axis)
    else:
        c.identity(logits, c.output("Softmax"))
        log_p = c.node("Log", [logits])
    (_soft_loss if a["soft_label"] else _picked_loss)(c, log_p, label, axis, c.output("Loss"))
