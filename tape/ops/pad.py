"""pad3d: Paddle's padding of 5-D (N, C, D, H, W) or (N, D, H, W, C) inputs (F.pad's op for
images and volumes), in modes constant, reflect, replicate and circular."""
from __future__ import annotations

from .. import dtypes
from ..attribute import FLOAT, INTS, STRING, Attr, OneOf
from ..registry import GradOp, Slot, register_op
from .rules import fmt, require_float

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad3d_shape(ctx):
    x, a = ctx.input("X"), ctx.attrs
    require_float(ctx, "X", x)
    if len(x.shape) != 5:
        layout = "N, D, H, W, C" if a["data_format"] == "NDHWC" else "N, C, D, H, W"
        raise ctx.error(f"X must be 5-D ({layout}), received shape {fmt(x.shape)}")
    channels_last = a["data_format"] == "NDHWC"
    spatial = x.shape[1:4] if channels_last else x.shape[2:]
    if ctx.has_input("Paddings"):
        given = ctx.input("Paddings")
        if given.dtype not in (dtypes.INT32, dtypes.INT64) or given.shape not in ((6,), (-1,)):
            raise ctx.error(f"input Paddings must be 6 int32 or int64 values, received "
                            f"{dtypes.name(given.dtype)} {fmt(given.shape)}")
        out = (-1, -1, -1)
    else:
        paddings = a["paddings"]
        if len(paddings) != 6:
            raise ctx.error(f"attribute paddings={list(paddings)} must hold 6 values (left, "
                            f"right, top, bottom, front, back), received {len(paddings)}")
        out = []
        # paddings run from the last spatial axis (width) to the first (depth)
        for axis, side in enumerate(spatial):
            low, high = paddings[4 - 2 * axis], paddings[5 - 2 * axis]
            check_pad_fits(ctx, a["mode"], "DHW"[axis], side, low, high)
            out.append(-1 if side < 0 else side + low + high)
    n, c = x.shape[0], x.shape[4] if channels_last else x.shape[1]
    ctx.set_output("Out", (n, *out, c) if channels_last else (n, c, *out), x.dtype)


def check_pad_fits(ctx, mode: str, axis: str, side: int, low: int, high: int) -> None:
    """Paddle's limit, a reflected pad shorter than its side; and Tape's, no negative pad
    (Paddle crops with one in constant mode)."""
    if min(low, high) < 0:
        raise ctx.error(f"paddings ({low}, {high}) of axis {axis}: expected pads >= 0 (a "
                        f"negative pad, which crops, is not supported)")
    if mode == "reflect" and side >= 0 and max(low, high) >= side:
        raise ctx.error(f"mode 'reflect' pads axis {axis} of size {side} by ({low}, {high}): "
                        f"expected each pad < {side}")


def _pad3d_case(d):
    layout, mode = d.choice(("NCDHW", "NDHWC")), d.choice(PAD_MODES)
    spatial = [d.integer(1, 3) for _ in range(3)]
    # reflect needs pads below the side; circular pads may wrap more than once
    limits = [side - 1 if mode == "reflect" else 3 if mode == "circular" else 2
              for side in spatial]
    paddings = [d.integer(0, limits[axis]) for axis in (2, 2, 1, 1, 0, 0)]
    batch, channels = d.integer(1, 2), d.integer(1, 2)
    shape = (batch, *spatial, channels) if layout == "NDHWC" else (batch, channels, *spatial)
    return {"X": d.floats(shape)}, {"paddings": paddings, "mode": mode, "data_format": layout,
                                    "value": d.choice((0.0, 1.5, -2.0))}


register_op(
    "pad3d",
    inputs=[Slot("X", "(N, C, D, H, W) or (N, D, H, W, C)"),
            Slot("Paddings", "the 6 paddings as an int tensor, instead of the attribute",
                 dispensable=True)],
    outputs=[Slot("Out", "X padded")],
    attrs=[Attr("paddings", INTS, None, "(left, right, top, bottom, front, back): cells added "
                "before and after the width, height and depth"),
           Attr("mode", STRING, "constant", "constant (value), reflect (mirrored, the edge "
                "not repeated), replicate (the edge repeated) or circular (wrapped around)",
                check=OneOf(*PAD_MODES)),
           Attr("value", FLOAT, 0.0, "the constant of mode constant"),
           Attr("data_format", STRING, "NCDHW", "layout", check=OneOf("NCDHW", "NDHWC"))],
    infer_shape=_pad3d_shape,
    grad=GradOp(reads=["X", "Paddings"], no_need_buffer=["X"], grads=("X",)),
    case=_pad3d_case,
    doc="Out[n, c, z, y, x] = X[n, c, src(z), src(y), src(x)] with src along each axis of size "
        "S padded by (p0, p1): i - p0 when inside; outside, value (constant), the mirror "
        "|i - p0| or 2 (S - 1) - (i - p0) (reflect), the nearest edge (replicate), or "
        "(i - p0) mod S (circular). The gradient adds each Out cell's into the X cell it copies.")
