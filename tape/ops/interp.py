"""bilinear_interp_v2 and nearest_interp_v2: Paddle's 2-D image resizing (F.interpolate).

The output size comes from the SizeTensor, OutSize or Scale inputs when given (their values are
known only when the op runs: the shape rule then leaves those sides -1, as Paddle's compile-time
rule does), else from the ``scale`` or ``out_h``/``out_w`` attributes
(``tape.geometry.interp_output_size``, shared with the kernels).
"""
from __future__ import annotations

from .. import dtypes
from ..attribute import BOOLEAN, FLOATS, INT, STRING, Attr, OneOf
from ..geometry import interp_output_size
from ..registry import GradOp, Slot, register_op
from .rules import fmt, require_float

INTERP_METHODS = ("bilinear", "nearest")


def _require_int_vector(ctx, slot: str, lengths: tuple) -> None:
    desc = ctx.input(slot)
    if desc.dtype not in (dtypes.INT32, dtypes.INT64):
        raise ctx.error(f"input {slot} must be int32 or int64, received "
                        f"{dtypes.name(desc.dtype)}")
    if len(desc.shape) != 1 or desc.shape[0] not in lengths + (-1,):
        raise ctx.error(f"input {slot} must be 1-D with {' or '.join(map(str, lengths))} "
                        f"values, received shape {fmt(desc.shape)}")


def _interp_shape(ctx):
    x, a = ctx.input("X"), ctx.attrs
    require_float(ctx, "X", x)
    if len(x.shape) != 4:
        raise ctx.error(f"X must be 4-D (N, C, H, W) or (N, H, W, C), received shape "
                        f"{fmt(x.shape)}")
    channels_last = a["data_layout"] == "NHWC"
    in_hw = x.shape[1:3] if channels_last else x.shape[2:]
    unknown = False
    if ctx.has_input("SizeTensor"):
        sizes = ctx.inputs("SizeTensor")
        if len(sizes) != 2:
            raise ctx.error(f"input SizeTensor must hold 2 tensors (out_h, out_w), received "
                            f"{len(sizes)}")
        for d in sizes:
            if d.dtype not in (dtypes.INT32, dtypes.INT64) or d.shape not in ((1,), ()):
                raise ctx.error(f"each SizeTensor must be one int32 or int64 value, received "
                                f"{dtypes.name(d.dtype)} {fmt(d.shape)}")
        unknown = True
    if ctx.has_input("OutSize"):
        _require_int_vector(ctx, "OutSize", (2,))
        unknown = True
    if ctx.has_input("Scale"):
        scale = ctx.input("Scale")
        require_float(ctx, "Scale", scale)
        if len(scale.shape) != 1 or scale.shape[0] not in (1, 2, -1):
            raise ctx.error(f"input Scale must be 1-D with 1 or 2 values, received shape "
                            f"{fmt(scale.shape)}")
        unknown = True
    if len(a["scale"]) > 1 and min(a["scale"][:2]) <= 0:
        raise ctx.error(f"attribute scale={list(a['scale'])} must be > 0")
    out_h, out_w = (-1, -1) if unknown else \
        interp_output_size(in_hw, (a["out_h"], a["out_w"]), a["scale"])[0]
    for side, size, given in (("height", out_h, in_hw[0]), ("width", out_w, in_hw[1])):
        if size != -1 and given != -1 and size < 1:
            raise ctx.error(f"the output {side} is {size} (X {fmt(x.shape)}, out_h="
                            f"{a['out_h']}, out_w={a['out_w']}, scale={list(a['scale'])}): "
                            f"expected > 0")
    n, c = x.shape[0], x.shape[3] if channels_last else x.shape[1]
    ctx.set_output("Out", (n, out_h, out_w, c) if channels_last else (n, c, out_h, out_w),
                   x.dtype)


def _interp_case(d, method):
    layout = d.choice(("NCHW", "NHWC"))
    in_h, in_w = d.integer(1, 4), d.integer(1, 4)
    shape = (d.integer(1, 2), in_h, in_w, d.integer(1, 2)) if layout == "NHWC" else \
        (d.integer(1, 2), d.integer(1, 2), in_h, in_w)
    attrs = {"interp_method": method, "data_layout": layout, "align_corners": d.boolean(),
             "align_mode": d.integer(0, 1)}
    if d.boolean():
        attrs["scale"] = [d.choice((0.5, 0.75, 1.5, 2.0, 1.0)) for _ in range(2)]
        if min(side * s for side, s in zip((in_h, in_w), attrs["scale"])) < 1:
            attrs["scale"] = [2.0, 1.5]
    else:
        attrs["out_h"], attrs["out_w"] = d.integer(1, 5), d.integer(1, 5)
    return {"X": d.floats(shape)}, attrs


_INTERP_DOC = (
    "Out[n, c, k, l] = sum over i, j of Wh[k, i] * Ww[l, j] * X[n, c, i, j]: each side "
    "resized by a weight matrix whose row k reads X at s = ratio * k (align_corners: ratio = "
    "(in - 1) / (out - 1); else ratio = 1 / scale or in / out, and with align_mode 0, s = "
    "ratio * (k + 0.5) - 0.5, clipped at 0). bilinear: weights 1 - (s - floor(s)) and s - "
    "floor(s) on cells floor(s) and floor(s) + 1 (the last cell when past the end); nearest: "
    "weight 1 on cell int(s) (int(s + 0.5) with align_corners). Weights are float32, as "
    "Paddle's; an output of the input's size is X itself. interp_method picks the rule in "
    "both ops, as in Paddle.")

for _type, _method in (("bilinear_interp_v2", "bilinear"), ("nearest_interp_v2", "nearest")):
    register_op(
        _type,
        inputs=[Slot("X", "images (N, C, H, W) or (N, H, W, C)"),
                Slot("OutSize", "(out_h, out_w) as a 1-D int tensor", dispensable=True),
                Slot("SizeTensor", "out_h and out_w as two 1-element int tensors; first in "
                     "priority", duplicable=True, dispensable=True),
                Slot("Scale", "1 or 2 scales (height, width) as a 1-D float tensor",
                     dispensable=True)],
        outputs=[Slot("Out", "the resized images")],
        attrs=[Attr("data_layout", STRING, "NCHW", "where the channels are",
                    check=OneOf("NCHW", "NHWC")),
               Attr("out_d", INT, 0, "3-D only; unused"),
               Attr("out_h", INT, 0, "output height, when neither a tensor nor scale gives it"),
               Attr("out_w", INT, 0, "output width, likewise"),
               Attr("scale", FLOATS, (), "(scale_h, scale_w): output sides int(in * scale); "
                    "one value alone is ignored, as in Paddle"),
               Attr("interp_method", STRING, "bilinear", "bilinear or nearest",
                    check=OneOf(*INTERP_METHODS)),
               Attr("align_corners", BOOLEAN, True, "map the corner cells onto each other"),
               Attr("align_mode", INT, 1, "bilinear without align_corners: 0 samples at "
                    "cell centres (ratio * (k + 0.5) - 0.5), 1 at ratio * k",
                    check=OneOf(0, 1))],
        infer_shape=_interp_shape,
        grad=GradOp(reads=["X", "OutSize", "SizeTensor", "Scale"], no_need_buffer=["X"],
                         grads=("X",)),
        case=lambda d, method=_method: _interp_case(d, method),
        doc=_INTERP_DOC)
