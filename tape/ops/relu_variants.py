"""ReLU's variants in paddle.nn and the hard sigmoid: relu6, hard_sigmoid, hard_swish, swish,
silu, mish, elu, selu, and prelu with its learned slope (one, per channel, or per element).

Each gradient reads what Paddle's grad op reads (relu6_grad and hard_sigmoid_grad read Out,
hard_swish_grad X, ...), so the tape keeps the same values Paddle's backward keeps.
"""
import math

from ..attribute import FLOAT, STRING, Attr, OneOf
from ..registry import GradOp, Slot, register_op
from .rules import float_same_as, fmt, require_float, require_same_dtype


def _case(low, high, kinks=(), **attrs):
    """X of rank 0-4 in ``[low, high)``, off ``kinks`` (a function of the drawn attrs); each
    attribute drawn from its tuple of options."""
    def case(d):
        drawn = {name: d.choice(options) for name, options in attrs.items()}
        away = kinks(**drawn) if callable(kinks) else kinks
        return {"X": d.floats(d.shape(0, 4), low, high, away_from=away)}, drawn
    return case


def _unary(type, reads, doc, case, attrs=(), infer_shape=None):
    register_op(type, inputs=["X"], outputs=["Out"], attrs=list(attrs),
                infer_shape=infer_shape or float_same_as("X"), grad=GradOp(reads=reads),
                case=case, doc=doc)


def _positive(*names):
    """A float_same_as rule that also requires the attributes ``names`` to be > 0."""
    def rule(ctx):
        for name in names:
            if not ctx.attrs[name] > 0:
                raise ctx.error(f"attribute {name} must be > 0, received {ctx.attrs[name]}")
        float_same_as("X")(ctx)
    return rule


_unary("relu6", ["Out"], "Out = min(max(X, 0), 6); its gradient passes where 0 < Out < 6",
       _case(-2.0, 8.0, (0.0, 6.0)))

_unary("hard_sigmoid", ["Out"],
       "Out = min(max(slope * X + offset, 0), 1); its gradient is slope where 0 < Out < 1",
       _case(-4.0, 4.0, lambda slope, offset: (-offset / slope, (1 - offset) / slope),
             slope=(0.2, 1 / 6, 0.5, -0.3), offset=(0.5, 0.0, 0.2)),
       [Attr("slope", FLOAT, 0.2, "the slope of the linear part"),
        Attr("offset", FLOAT, 0.5, "the linear part's value at X = 0")])

_unary("hard_swish", ["X"],
       "Out = X * min(max(X + offset, 0), threshold) / scale. (Paddle 3.3.1's kernel ignores the "
       "three attributes and always uses 6, 6, 3; this follows them, as its proto documents.)",
       _case(-8.0, 8.0, lambda threshold, scale, offset: (-offset, threshold - offset),
             threshold=(6.0, 4.0), scale=(6.0, 5.0), offset=(3.0, 1.0)),
       [Attr("threshold", FLOAT, 6.0, "the cap of the gate X + offset (> 0)"),
        Attr("scale", FLOAT, 6.0, "what the capped gate is divided by (> 0)"),
        Attr("offset", FLOAT, 3.0, "added to X before the gate is capped")],
       _positive("threshold", "scale"))

_unary("swish", ["X"], "Out = X * sigmoid(X)", _case(-6.0, 6.0))
_unary("silu", ["X", "Out"], "Out = X * sigmoid(X) (the same function as swish)",
       _case(-6.0, 6.0))

_unary("mish", ["X"],
       "Out = X * tanh(softplus(X)), softplus(X) = X where X > threshold, else log(1 + exp(X)). "
       "dX is the derivative of Out (Paddle 3.3.1's differs where X > threshold, by "
       "X (1 - tanh(X)^2) exp(-X): below 1e-30 relative at the default threshold 20)",
       _case(-6.0, 6.0, lambda threshold: (threshold,), threshold=(20.0, 1.0, -0.5)),
       [Attr("threshold", FLOAT, 20.0, "where softplus becomes the identity")])

_unary("elu", ["X", "Out"], "Out = X where X > 0, else alpha * (exp(X) - 1)",
       _case(-4.0, 3.0, (0.0,), alpha=(1.0, 0.5, 2.0, -0.5, 0.0)),
       [Attr("alpha", FLOAT, 1.0, "the negative part's scale")])

# Paddle's constants: lambda and alpha of the SELU paper
_SELU_SCALE, _SELU_ALPHA = 1.0507009873554804934, 1.6732632423543772848


def _selu_shape(ctx):
    scale, alpha = ctx.attrs["scale"], ctx.attrs["alpha"]
    if not (scale > 0 and alpha >= 0):
        raise ctx.error(f"attributes scale={scale} and alpha={alpha}: expected scale > 0 and "
                        f"alpha >= 0 (paddle.nn.functional.selu asks scale > 1), which keep the "
                        f"sign of Out that of X, as selu_grad reads Out")
    float_same_as("X")(ctx)


_unary("selu", ["Out"], "Out = scale * X where X > 0, else scale * alpha * (exp(X) - 1)",
       _case(-4.0, 3.0, (0.0,), scale=(_SELU_SCALE, 1.5, 0.5), alpha=(_SELU_ALPHA, 0.0, 2.0)),
       [Attr("scale", FLOAT, _SELU_SCALE, "the overall scale (> 0)"),
        Attr("alpha", FLOAT, _SELU_ALPHA, "the negative part's scale (>= 0)")],
       _selu_shape)


# ---- prelu ----

def _prelu_shape(ctx):
    x, alpha = ctx.input("X"), ctx.input("Alpha")
    mode, data_format = ctx.attrs["mode"], ctx.attrs["data_format"]
    require_float(ctx, "X", x)
    require_same_dtype(ctx, "X", "Alpha")
    rank = len(x.shape)
    if mode == "all":
        need = 1
    elif mode == "channel":
        if rank < 2:
            raise ctx.error(f"mode 'channel' needs X of rank >= 2 (N, C, ...), received X "
                            f"{fmt(x.shape)}")
        need = x.shape[-1 if data_format == "NHWC" else 1]
    else:
        if rank < 1 or len(alpha.shape) != rank:
            raise ctx.error(f"mode 'element' needs X of rank >= 1 and Alpha of X's rank, "
                            f"received X {fmt(x.shape)} and Alpha {fmt(alpha.shape)}")
        # Paddle's rule: the dims past the first hold as many values as a sample of X
        need = -1 if -1 in x.shape[1:] else math.prod(x.shape[1:])
        got = -1 if -1 in alpha.shape[1:] else math.prod(alpha.shape[1:])
        if -1 not in (need, got) and got != need:
            raise ctx.error(f"mode 'element': Alpha {fmt(alpha.shape)} holds {got} values past "
                            f"its first dim, X {fmt(x.shape)} {need} per sample: expected "
                            f"equal")
        need = None
    size = -1 if -1 in alpha.shape else math.prod(alpha.shape)
    if need is not None and -1 not in (need, size) and size != need:
        raise ctx.error(f"mode '{mode}' ({data_format}) needs Alpha of {need} value(s) for X "
                        f"{fmt(x.shape)}, received Alpha {fmt(alpha.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


def _prelu_case(d):
    mode, data_format = d.choice(("all", "channel", "element")), d.choice(("NCHW", "NHWC"))
    x = d.floats(d.shape(2 if mode == "channel" else 1, 4), away_from=[0.0])
    if mode == "all":
        shape = d.choice(((1,), (), (1, 1)))
    elif mode == "channel":   # (C,), or for NCHW also (C, 1, ...) to X's rank
        channels = x.shape[-1 if data_format == "NHWC" else 1]
        shape = d.choice(((channels,), (channels,) + (1,) * (x.ndim - 2)))
    else:
        shape = (1,) + x.shape[1:]
    alpha = d.floats(shape, -0.5, 1.5)
    return {"X": x, "Alpha": alpha}, {"mode": mode, "data_format": data_format}


register_op(
    "prelu",
    inputs=[Slot("X", "the input, floating"),
            Slot("Alpha", "the slopes for X <= 0: one value (all), C values (channel), or X's "
                          "shape past the batch axis with a leading 1 (element)")],
    outputs=["Out"],
    attrs=[Attr("data_format", STRING, "NCHW", "where the channel axis is: NCHW (axis 1) or "
                "NHWC (the last)", check=OneOf("NCHW", "NHWC")),
           Attr("mode", STRING, "all", "how Alpha is shared: all, channel or element",
                check=OneOf("all", "channel", "element"))],
    infer_shape=_prelu_shape, case=_prelu_case, grad=GradOp(reads=["X", "Alpha"]),
    doc="Out = X where X > 0, else Alpha * X, Alpha broadcast by mode; dAlpha sums X * dOut "
        "where X <= 0 over what shares a slope")
