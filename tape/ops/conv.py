"""conv2d and depthwise_conv2d: 2-D convolution (cross-correlation) over NCHW images, with
groups and dilations; conv2d_transpose and depthwise_conv2d_transpose: their adjoints.

The input checks here (``check_nchw``, ``check_pairs``) are shared with pool2d (which takes
NCHW only; the convolutions take NHWC too); the padding
geometry (``resolve_paddings``) is in tape/geometry.py, shared with the kernels, so that the
shape rule and the kernels agree by construction.
"""
from __future__ import annotations

from ..attribute import BOOLEAN, INT, INTS, STRING, AtLeast, Attr, Each, OneOf
from ..geometry import conv_transpose_geometry, resolve_paddings
from ..registry import GradOp, Slot, register_op
from .rules import fmt, require_float, require_same_dtype

PADDING_ALGORITHMS = ("EXPLICIT", "SAME", "VALID")
DATA_FORMATS = ("NCHW", "NHWC", "AnyLayout")


def check_nchw(ctx, slot: str, desc) -> None:
    """The input is 4-D and the op's data_format is NCHW (the only layout the kernels take)."""
    layout = ctx.attrs["data_format"]
    if layout == "NHWC":
        raise ctx.error("data_format='NHWC' is not supported: expected 'NCHW' (or 'AnyLayout', "
                        "read as NCHW); transpose the input to NCHW first")
    if len(desc.shape) != 4:
        raise ctx.error(f"input {slot} must be 4-D (N, C, H, W), received shape "
                        f"{fmt(desc.shape)}")


def image_dims(ctx, slot: str, desc) -> tuple:
    """``(N, C, H, W)`` of a 4-D input in the op's data_format (NHWC, or NCHW / AnyLayout)."""
    if len(desc.shape) != 4:
        raise ctx.error(f"input {slot} must be 4-D (N, C, H, W), or (N, H, W, C) with "
                        f"data_format NHWC, received shape {fmt(desc.shape)}")
    n, *rest = desc.shape
    return (n, rest[2], rest[0], rest[1]) if ctx.attrs["data_format"] == "NHWC" else desc.shape


def in_layout(ctx, n, c, h, w) -> tuple:
    """An output shape in the op's data_format."""
    return (n, h, w, c) if ctx.attrs["data_format"] == "NHWC" else (n, c, h, w)


def check_pairs(ctx, *names: str) -> None:
    """Each named INTS attribute holds two values (height, width); paddings two or four."""
    for name in names:
        value = ctx.attrs[name]
        if len(value) != 2:
            raise ctx.error(f"attribute {name}={list(value)} must hold 2 values "
                            f"(height, width), received {len(value)}")
    paddings = ctx.attrs["paddings"]
    if len(paddings) not in (2, 4):
        raise ctx.error(f"attribute paddings={list(paddings)} must hold 2 values (height, "
                        f"width) or 4 (top, bottom, left, right), received {len(paddings)}")


def _output_side(ctx, side: str, size: int, k: int, dilation: int, pad0: int, pad1: int,
                 stride: int) -> int:
    """One output side of a convolution; -1 when the input or kernel side is unknown."""
    if size < 0 or k < 0 or pad0 < 0:
        return -1
    span = dilation * (k - 1) + 1
    if size + pad0 + pad1 < span:
        raise ctx.error(f"Input {side} {size} padded to {size + pad0 + pad1} (paddings {pad0}, "
                        f"{pad1}) is smaller than the Filter's dilated {side} {span} (kernel {k}, "
                        f"dilation {dilation}): expected padded input >= dilated kernel")
    return (size + pad0 + pad1 - span) // stride + 1


def _operands(ctx, filter_layout: str):
    """``(Input, Filter, (N, C, H, W))`` of a convolution, checked: floating, one dtype, a 4-D
    image in the data_format, a 4-D Filter, strides and dilations in pairs."""
    x, w = ctx.input("Input"), ctx.input("Filter")
    require_float(ctx, "Input", x)
    require_same_dtype(ctx, "Input", "Filter")
    dims = image_dims(ctx, "Input", x)
    if len(w.shape) != 4:
        raise ctx.error(f"input Filter must be 4-D {filter_layout}, received shape "
                        f"{fmt(w.shape)}")
    check_pairs(ctx, "strides", "dilations")
    return x, w, dims


def _conv2d_shape(ctx):
    x, w, (n, c, h, width) = _operands(ctx, "(M, C/groups, kh, kw)")
    a = ctx.attrs
    groups = a["groups"]
    m, group_channels, kh, kw = w.shape
    if c >= 0 and c != group_channels * groups:
        raise ctx.error(f"Input {fmt(x.shape)} has {c} channels but Filter {fmt(w.shape)} with "
                        f"groups={groups} takes Filter.shape[1] * groups = "
                        f"{group_channels * groups}")
    if m >= 0 and m % groups:
        raise ctx.error(f"Filter {fmt(w.shape)} has {m} output channels, which groups={groups} "
                        f"does not divide")
    if ctx.op_type == "depthwise_conv2d" and c >= 0 and groups != c:
        raise ctx.error(f"groups={groups} must equal the {c} channels of Input {fmt(x.shape)}: "
                        f"depthwise_conv2d convolves each channel on its own")
    pads, dilations = resolve_paddings((h, width), (kh, kw), a["strides"], a["paddings"],
                                       a["dilations"], a["padding_algorithm"])
    out_h = _output_side(ctx, "height", h, kh, dilations[0], pads[0], pads[1], a["strides"][0])
    out_w = _output_side(ctx, "width", width, kw, dilations[1], pads[2], pads[3],
                         a["strides"][1])
    ctx.set_output("Output", in_layout(ctx, n, m, out_h, out_w), x.dtype)


def _conv2d_case(d):
    groups = d.choice((1, 1, 2, 3))
    channels, out_channels = groups * d.integer(1, 2), groups * d.integer(1, 2)
    kh, kw = d.integer(1, 3), d.integer(1, 3)
    strides, dilations = [d.integer(1, 2), d.integer(1, 2)], [d.integer(1, 2), d.integer(1, 2)]
    algorithm = d.choice(PADDING_ALGORITHMS + ("EXPLICIT",))
    paddings = [d.integer(0, 2) for _ in range(d.choice((2, 4)))]
    pads, spans = resolve_paddings((5, 5), (kh, kw), strides, paddings, dilations, algorithm)
    # the smallest sides (<= 5) for which the dilated kernel fits the padded input
    low = [max(1, dil * (k - 1) + 1 - p0 - p1)
           for dil, k, p0, p1 in zip(spans, (kh, kw), pads[::2], pads[1::2])]
    h, w = d.integer(low[0], max(low[0], 5)), d.integer(low[1], max(low[1], 5))
    layout = d.choice(DATA_FORMATS)
    inputs = {"Input": d.floats(_in_layout(layout, d.integer(1, 2), channels, h, w)),
              "Filter": d.floats((out_channels, channels // groups, kh, kw))}
    return inputs, {"strides": strides, "paddings": paddings, "dilations": dilations,
                    "groups": groups, "padding_algorithm": algorithm, "data_format": layout}


def _in_layout(layout, n, c, h, w) -> tuple:
    return (n, h, w, c) if layout == "NHWC" else (n, c, h, w)


def conv_attrs(transpose: bool = False) -> list:
    """The attributes of Paddle's convolution ops (and, with ``transpose``, of the transposed
    ones, which add output_size and output_padding and drop cuDNN's workspace settings)."""
    attrs = [Attr("strides", INTS, (1, 1), "(height, width) steps", check=Each(AtLeast(1))),
             Attr("paddings", INTS, (0, 0), "zeros added: (height, width) on both sides, or "
                  "(top, bottom, left, right)", check=Each(AtLeast(0))),
             Attr("padding_algorithm", STRING, "EXPLICIT", "EXPLICIT: use paddings; SAME: "
                  "output side ceil(in / stride); VALID: no padding",
                  check=OneOf(*PADDING_ALGORITHMS)),
             Attr("dilations", INTS, (1, 1), "(height, width) gaps between kernel taps",
                  check=Each(AtLeast(1))),
             Attr("groups", INT, 1, "channel groups: group g maps its C/groups input channels "
                  "to its M/groups output channels", check=AtLeast(1)),
             Attr("data_format", STRING, "NCHW", "layout of Input and Output: NCHW or NHWC "
                  "(AnyLayout reads as NCHW); Filter is (M, C/groups, kh, kw) in both",
                  check=OneOf(*DATA_FORMATS)),
             Attr("use_cudnn", BOOLEAN, False, "GPU only; no effect here")]
    if transpose:
        return attrs + [
            Attr("output_size", INTS, (), "(height, width) of Output, or empty: the smallest "
                 "size; it may add up to stride - 1 cells", check=Each(AtLeast(1))),
            Attr("output_padding", INTS, (), "(height, width) cells added to the smallest "
                 "Output size, each < max(stride, dilation); or empty", check=Each(AtLeast(0))),
            Attr("is_test", BOOLEAN, False, "inference mode; no effect")]
    return attrs + [
        Attr("exhaustive_search", BOOLEAN, False, "cuDNN algorithm search; no effect here"),
        Attr("workspace_size_MB", INT, 512, "cuDNN workspace limit; no effect here",
             check=AtLeast(0)),
        Attr("is_test", BOOLEAN, False, "inference mode; no effect")]


_CONV_DOC = ("Output[n, m, y, x] = sum over c < C/groups, i < kh, j < kw of Filter[m, c, i, j] * "
             "pad(Input)[n, g * C/groups + c, y * sh + i * dh, x * sw + j * dw], with g = m // "
             "(M/groups) the group of output channel m; H_out = (H + pad_top + pad_bottom - "
             "(dh * (kh - 1) + 1)) // sh + 1, W_out likewise.")

def _depthwise_conv2d_case(d):
    channels = d.integer(1, 3)
    inputs, attrs = _conv2d_case(d)
    x, w = inputs["Input"], inputs["Filter"]
    n, h, width = (x.shape[0], *x.shape[1:3]) if attrs["data_format"] == "NHWC" else \
        (x.shape[0], *x.shape[2:])
    multiplier = d.integer(1, 2)
    inputs = {"Input": d.floats(_in_layout(attrs["data_format"], n, channels, h, width)),
              "Filter": d.floats((channels * multiplier, 1) + w.shape[2:])}
    return inputs, {**attrs, "groups": channels}


for _type, _filter, _case, _doc in (
        ("conv2d", "kernels (M, C / groups, kh, kw)", _conv2d_case, ""),
        ("depthwise_conv2d", "kernels (M, 1, kh, kw), M a multiple of C",
         _depthwise_conv2d_case, "conv2d with groups = C (required): each input channel c "
         "convolved by its own M/C kernels, Output channels c * M/C ... (c + 1) * M/C - 1. ")):
    register_op(
        _type,
        inputs=[Slot("Input", "images (N, C, H, W)"), Slot("Filter", _filter)],
        outputs=[Slot("Output", "(N, M, H_out, W_out)")],
        attrs=conv_attrs(),
        infer_shape=_conv2d_shape,
        grad=GradOp(reads=["Input", "Filter"]),
        case=_case,
        doc=_doc + _CONV_DOC)


# ---- transposed convolution ----

def _conv2d_transpose_shape(ctx):
    if ctx.has_input("Bias"):
        raise ctx.error("input Bias is not supported (Paddle reads it in oneDNN kernels only): "
                        "add the bias with elementwise_add")
    x, w, (n, c, h, width) = _operands(ctx, "(C, M/groups, kh, kw)")
    a = ctx.attrs
    groups = a["groups"]
    if c >= 0 and w.shape[0] >= 0 and c != w.shape[0]:
        raise ctx.error(f"Input {fmt(x.shape)} has {c} channels but Filter {fmt(w.shape)} takes "
                        f"Filter.shape[0] = {w.shape[0]}")
    if c >= 0 and c % groups:
        raise ctx.error(f"Input {fmt(x.shape)} has {c} channels, which groups={groups} does not "
                        f"divide")
    if ctx.op_type == "depthwise_conv2d_transpose" and c >= 0 and groups != c:
        raise ctx.error(f"groups={groups} must equal the {c} channels of Input {fmt(x.shape)}")
    for name in ("output_size", "output_padding"):
        if len(a[name]) not in (0, 2):
            raise ctx.error(f"attribute {name}={list(a[name])} must hold 2 values (height, "
                            f"width) or none, received {len(a[name])}")
    pads, dilations, out, smallest = conv_transpose_geometry(
        (h, width), w.shape[2:], a["strides"], a["paddings"], a["dilations"],
        a["padding_algorithm"], a["output_size"], a["output_padding"])
    for i, side in enumerate(("height", "width")):
        low, stride = smallest[i], a["strides"][i]
        if low == -1:
            continue
        if low < 1:
            raise ctx.error(f"Input {fmt(x.shape)} with Filter {fmt(w.shape)}, strides "
                            f"{list(a['strides'])} and paddings {list(pads)} gives an Output "
                            f"{side} of {low}: expected >= 1")
        if a["output_size"] and not low <= out[i] < low + stride:
            raise ctx.error(f"attribute output_size={list(a['output_size'])}: the {side} "
                            f"{out[i]} must be in [{low}, {low + stride}) for Input "
                            f"{fmt(x.shape)} (stride {stride})")
        if a["output_padding"] and not a["output_padding"][i] < max(stride, dilations[i]):
            raise ctx.error(f"attribute output_padding={list(a['output_padding'])}: the {side} "
                            f"{a['output_padding'][i]} must be < max(stride {stride}, dilation "
                            f"{dilations[i]})")
    ctx.set_output("Output", in_layout(ctx, n, w.shape[1] * groups, *out), x.dtype)


def _conv2d_transpose_case(d, depthwise=False):
    groups = d.integer(1, 3) if depthwise else d.choice((1, 1, 2, 3))
    channels = groups * (1 if depthwise else d.integer(1, 2))
    per_group = 1 if depthwise and d.boolean() else d.integer(1, 2)
    kh, kw = d.integer(1, 3), d.integer(1, 3)
    strides, dilations = [d.integer(1, 2), d.integer(1, 2)], [d.integer(1, 2), d.integer(1, 2)]
    algorithm = d.choice(PADDING_ALGORITHMS + ("EXPLICIT",))
    paddings = [d.integer(0, 1) for _ in range(d.choice((2, 4)))]
    layout = d.choice(DATA_FORMATS)
    sides = (d.integer(2, 4), d.integer(2, 4))
    x_shape = _in_layout(layout, d.integer(1, 2), channels, *sides)
    attrs = {"strides": strides, "paddings": paddings, "dilations": dilations,
             "groups": groups, "padding_algorithm": algorithm, "data_format": layout}
    pads, dils, _, smallest = conv_transpose_geometry(sides, (kh, kw), strides, paddings,
                                                      dilations, algorithm, (), ())
    if min(smallest) < 1:   # padding ate the whole output: pad nothing instead
        attrs["paddings"], attrs["padding_algorithm"] = [0, 0], "VALID"
        _, dils, _, smallest = conv_transpose_geometry(sides, (kh, kw), strides, [0, 0],
                                                       dilations, "VALID", (), ())
    extra = d.choice(("none", "size", "padding"))
    if extra == "size":
        attrs["output_size"] = [low + d.integer(0, s - 1) for low, s in zip(smallest, strides)]
    elif extra == "padding":
        attrs["output_padding"] = [d.integer(0, max(s, dl) - 1) for s, dl in zip(strides, dils)]
    inputs = {"Input": d.floats(x_shape),
              "Filter": d.floats((channels, per_group, kh, kw))}
    return inputs, attrs


_TRANSPOSE_DOC = (
    "The adjoint of conv2d: Output = the gradient of conv2d(Output-shaped images, Filter) "
    "with respect to its images, given Input as that conv2d's output gradient. Each Input cell "
    "(y, x) of channel c in group g adds Input[n, c, y, x] * Filter[c, m, i, j] to "
    "Output[n, g * M/groups + m, y * sh - pad_top + i * dh, x * sw - pad_left + j * dw]. "
    "H_out = (H - 1) * sh - pad_top - pad_bottom + dh * (kh - 1) + 1 (+ output_padding), or "
    "output_size; SAME pads as conv2d would pad an H-sided input.")

for _type, _filter, _depthwise in (
        ("conv2d_transpose", "kernels (C, M/groups, kh, kw)", False),
        ("depthwise_conv2d_transpose", "kernels (C, M/C, kh, kw), groups = C", True)):
    register_op(
        _type,
        inputs=[Slot("Input", "images (N, C, H, W)"), Slot("Filter", _filter),
                Slot("Bias", "oneDNN only; not supported", dispensable=True)],
        outputs=[Slot("Output", "(N, M, H_out, W_out)")],
        attrs=conv_attrs(transpose=True),
        infer_shape=_conv2d_transpose_shape,
        grad=GradOp(reads=["Input", "Filter"], grads=("Input", "Filter")),
        case=lambda d, depthwise=_depthwise: _conv2d_transpose_case(d, depthwise),
        doc=("conv2d_transpose with groups = C (required). " if _depthwise else "")
        + _TRANSPOSE_DOC)
