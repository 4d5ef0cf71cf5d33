"""conv2d: 2-D convolution (cross-correlation) over NCHW images, with groups and dilations.

The input checks here (``check_nchw``, ``check_pairs``) are shared with pool2d; the padding
geometry (``resolve_paddings``) is in tape/geometry.py, shared with the kernels, so that the
shape rule and the kernels agree by construction.
"""
from __future__ import annotations

from ..attribute import BOOLEAN, INT, INTS, STRING, AtLeast, Attr, Each, OneOf
from ..geometry import resolve_paddings
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


def _conv2d_shape(ctx):
    x, w = ctx.input("Input"), ctx.input("Filter")
    require_float(ctx, "Input", x)
    require_same_dtype(ctx, "Input", "Filter")
    check_nchw(ctx, "Input", x)
    if len(w.shape) != 4:
        raise ctx.error(f"input Filter must be 4-D (M, C/groups, kh, kw), received shape "
                        f"{fmt(w.shape)}")
    check_pairs(ctx, "strides", "dilations")
    a = ctx.attrs
    groups = a["groups"]
    n, c, h, width = x.shape
    m, group_channels, kh, kw = w.shape
    if c >= 0 and c != group_channels * groups:
        raise ctx.error(f"Input {fmt(x.shape)} has {c} channels but Filter {fmt(w.shape)} with "
                        f"groups={groups} takes Filter.shape[1] * groups = "
                        f"{group_channels * groups}")
    if m >= 0 and m % groups:
        raise ctx.error(f"Filter {fmt(w.shape)} has {m} output channels, which groups={groups} "
                        f"does not divide")
    pads, dilations = resolve_paddings((h, width), (kh, kw), a["strides"], a["paddings"],
                                       a["dilations"], a["padding_algorithm"])
    out_h = _output_side(ctx, "height", h, kh, dilations[0], pads[0], pads[1], a["strides"][0])
    out_w = _output_side(ctx, "width", width, kw, dilations[1], pads[2], pads[3],
                         a["strides"][1])
    ctx.set_output("Output", (n, m, out_h, out_w), x.dtype)


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
    inputs = {"Input": d.floats((d.integer(1, 2), channels, h, w)),
              "Filter": d.floats((out_channels, channels // groups, kh, kw))}
    return inputs, {"strides": strides, "paddings": paddings, "dilations": dilations,
                    "groups": groups, "padding_algorithm": algorithm,
                    "data_format": d.choice(("NCHW", "AnyLayout"))}


register_op(
    "conv2d",
    inputs=[Slot("Input", "images (N, C, H, W)"),
            Slot("Filter", "kernels (M, C / groups, kh, kw)")],
    outputs=[Slot("Output", "(N, M, H_out, W_out)")],
    attrs=[Attr("strides", INTS, (1, 1), "(height, width) steps", check=Each(AtLeast(1))),
           Attr("paddings", INTS, (0, 0), "zeros added: (height, width) on both sides, or "
                "(top, bottom, left, right)", check=Each(AtLeast(0))),
           Attr("padding_algorithm", STRING, "EXPLICIT", "EXPLICIT: use paddings; SAME: "
                "output side ceil(in / stride); VALID: no padding",
                check=OneOf(*PADDING_ALGORITHMS)),
           Attr("dilations", INTS, (1, 1), "(height, width) gaps between kernel taps",
                check=Each(AtLeast(1))),
           Attr("groups", INT, 1, "channel groups: group g maps its C/groups input channels "
                "to its M/groups output channels", check=AtLeast(1)),
           Attr("data_format", STRING, "NCHW", "layout; only NCHW (AnyLayout reads as NCHW)",
                check=OneOf(*DATA_FORMATS)),
           Attr("use_cudnn", BOOLEAN, False, "GPU only; no effect here"),
           Attr("exhaustive_search", BOOLEAN, False, "cuDNN algorithm search; no effect here"),
           Attr("workspace_size_MB", INT, 512, "cuDNN workspace limit; no effect here",
                check=AtLeast(0)),
           Attr("is_test", BOOLEAN, False, "inference mode; no effect on conv2d")],
    infer_shape=_conv2d_shape,
    grad=GradOp(reads=["Input", "Filter"]),
    case=_conv2d_case,
    doc="Output[n, m, y, x] = sum over c < C/groups, i < kh, j < kw of Filter[m, c, i, j] * "
        "pad(Input)[n, g * C/groups + c, y * sh + i * dh, x * sw + j * dw], with g = m // "
        "(M/groups) the group of output channel m; H_out = (H + pad_top + pad_bottom - "
        "(dh * (kh - 1) + 1)) // sh + 1, W_out likewise.")
