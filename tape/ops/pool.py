"""pool2d: max and average pooling over NCHW images (windows, global, adaptive, ceil mode)."""
from __future__ import annotations

from ..attribute import BOOLEAN, INTS, STRING, AtLeast, Attr, Each, OneOf
from ..geometry import pool_geometry, resolve_paddings
from ..registry import GradOp, Slot, register_op
from .conv import DATA_FORMATS, PADDING_ALGORITHMS, check_nchw, check_pairs
from .rules import fmt, require_float


def _pool2d_shape(ctx):
    x, a = ctx.input("X"), ctx.attrs
    require_float(ctx, "X", x)
    check_nchw(ctx, "X", x)
    check_pairs(ctx, "ksize", "strides")
    ksize, pads, out = pool_geometry(x.shape[2:], a["ksize"], a["strides"], a["paddings"],
                                     a["padding_algorithm"], a["global_pooling"], a["adaptive"],
                                     a["ceil_mode"])
    for side, size, k, n, pad0, pad1 in zip(("height", "width"), x.shape[2:], ksize, out,
                                            pads[::2], pads[1::2]):
        if n != -1 and n <= 0:
            raise ctx.error(f"X {side} {size} padded to {size + pad0 + pad1} (paddings {pad0}, "
                            f"{pad1}) is smaller than the window {side} ksize={k}: expected "
                            f"padded X {fmt(x.shape)} to hold one window")
    ctx.set_output("Out", x.shape[:2] + out, x.dtype)


def _pool2d_case(d):
    pooling_type = d.choice(("max", "avg"))
    batch, channels = d.integer(1, 2), d.integer(1, 2)
    if d.integer(0, 3) == 0:   # 2x2 windows tiling an even image: the kernels' own loops
        shape = (batch, channels, 2 * d.integer(1, 2), 2 * d.integer(1, 2))
        attrs = {"pooling_type": pooling_type, "ksize": [2, 2], "strides": [2, 2]}
    else:
        shape, attrs = _general_pool2d_case(d, batch, channels, pooling_type)
    x = d.distinct_floats(shape) if pooling_type == "max" else d.floats(shape)
    return {"X": x}, attrs


def _general_pool2d_case(d, batch, channels, pooling_type):
    ksize, strides = [d.integer(1, 3), d.integer(1, 3)], [d.integer(1, 3), d.integer(1, 3)]
    # pads below the window keep every window on the image (an all-padding window has no
    # max and no mean)
    paddings = [d.integer(0, k - 1) for k in ksize]
    if d.boolean():
        paddings = [paddings[0], d.integer(0, ksize[0] - 1), paddings[1],
                    d.integer(0, ksize[1] - 1)]
    attrs = {"pooling_type": pooling_type, "ksize": ksize, "strides": strides,
             "paddings": paddings, "padding_algorithm": d.choice(PADDING_ALGORITHMS),
             "global_pooling": d.integer(0, 5) == 0, "adaptive": d.integer(0, 3) == 0,
             "exclusive": d.boolean(), "ceil_mode": d.boolean(),
             "data_format": d.choice(("NCHW", "AnyLayout"))}
    pads, _ = resolve_paddings((5, 5), ksize, strides, paddings, (1, 1),
                               attrs["padding_algorithm"])
    low = [max(1, k - p0 - p1) for k, p0, p1 in zip(ksize, pads[::2], pads[1::2])]
    shape = (batch, channels, d.integer(low[0], 5), d.integer(low[1], 5))
    if attrs["ceil_mode"] and not _windows_start_inside(shape[2:], attrs):
        attrs["ceil_mode"] = False
    return shape, attrs


def _windows_start_inside(in_hw, a) -> bool:
    """Whether ceil mode's extra window still starts on the image."""
    ksize, pads, out = pool_geometry(in_hw, a["ksize"], a["strides"], a["paddings"],
                                     a["padding_algorithm"], a["global_pooling"], a["adaptive"],
                                     True)
    return all((n - 1) * s - pad < size
               for n, s, pad, size in zip(out, a["strides"], pads[::2], in_hw))


register_op(
    "pool2d",
    inputs=[Slot("X", "images (N, C, H, W)")],
    outputs=[Slot("Out", "(N, C, H_out, W_out)")],
    attrs=[Attr("ksize", INTS, None, "window (height, width); with adaptive: the output sides",
                check=Each(AtLeast(1))),
           Attr("pooling_type", STRING, None, "max or avg", check=OneOf("max", "avg")),
           Attr("strides", INTS, (1, 1), "(height, width) steps", check=Each(AtLeast(1))),
           Attr("paddings", INTS, (0, 0), "(height, width) on both sides, or (top, bottom, "
                "left, right)", check=Each(AtLeast(0))),
           Attr("global_pooling", BOOLEAN, False, "one window over the whole image; ksize and "
                "paddings are ignored"),
           Attr("exclusive", BOOLEAN, True, "avg: divide by the cells on the image, not by "
                "the window area"),
           Attr("adaptive", BOOLEAN, False, "output sides ksize; window i spans "
                "[floor(i * H / H_out), ceil((i + 1) * H / H_out))"),
           Attr("ceil_mode", BOOLEAN, False, "round the output sides up, not down"),
           Attr("padding_algorithm", STRING, "EXPLICIT", "EXPLICIT: use paddings; SAME: output "
                "side ceil(in / stride); VALID: no padding", check=OneOf(*PADDING_ALGORITHMS)),
           Attr("data_format", STRING, "NCHW", "layout; only NCHW (AnyLayout reads as NCHW)",
                check=OneOf(*DATA_FORMATS)),
           Attr("use_cudnn", BOOLEAN, False, "GPU only; no effect here"),
           Attr("is_test", BOOLEAN, False, "inference mode; no effect on pool2d")],
    infer_shape=_pool2d_shape,
    grad=GradOp(reads=["X", "Out"]),
    case=_pool2d_case,
    doc="Out[n, c, y, x] = max or mean of X[n, c] over the window rows [y * sh - pad_top, "
        "y * sh - pad_top + kh) and columns [x * sw - pad_left, x * sw - pad_left + kw), "
        "clipped to the image. Mean divides by the clipped window's area when exclusive "
        "(or adaptive), else by its area clipped only to H + pad_top, W + pad_left (Paddle's "
        "rule). H_out = (H + pad_top + pad_bottom - kh (+ sh - 1 with ceil_mode)) // sh + 1. "
        "The gradient of max goes to the first maximum of each window, in row-major order.")
