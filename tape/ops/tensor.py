"""Copies, layout and casts: assign, reshape2, transpose2, cast."""
import math

from .. import dtypes
from ..attribute import BOOLEAN, INT, INTS, Attr, OneOf
from ..registry import GradOp, Slot, register_op
from .rules import fmt, same_as, xshape


def _numel(shape):
    """The element count, or None when a dim is unknown (-1)."""
    return None if any(n < 0 for n in shape) else math.prod(shape)


# ---- copies and layout ----

def _assign_case(d):
    return {"X": d.floats(d.shape(1, 4, 1, 5))}, {}


def _reshape_target(ctx, x_shape, shape):
    """Paddle's reshape rule: 0 copies X's dim at that index, one -1 is inferred."""
    def bad(why):
        return ctx.error(f"attribute shape={list(shape)} cannot reshape X {fmt(x_shape)}: {why}")
    if shape.count(-1) > 1:
        raise bad("expected at most one -1")
    out = []
    for i, n in enumerate(shape):
        if n == 0:
            if i >= len(x_shape):
                raise bad(f"0 at index {i} copies X's dim {i}, but X has rank {len(x_shape)}")
            n = x_shape[i]
        elif n < -1:
            raise bad(f"expected dims >= -1, received {n} at index {i}")
        out.append(n)
    size = _numel(x_shape)
    if -1 in shape:
        unknown = shape.index(-1)
        known = math.prod(n for i, n in enumerate(out) if i != unknown)
        if known < 0 or size is None:    # a copied -1 dim: stays unknown
            return tuple(out)
        if known == 0 or size % known:
            raise bad(f"{size} elements do not divide into the other dims (product {known})")
        out[unknown] = size // known
    elif size is not None and math.prod(out) != size:
        raise bad(f"expected {size} elements, the shape holds {math.prod(out)}")
    return tuple(out)


def _reshape2_shape(ctx):
    for slot in ("Shape", "ShapeTensor"):
        if ctx.has_input(slot):
            raise ctx.error(f"input {slot} is not supported: expected the target shape in the "
                            f"'shape' attribute, received a tensor")
    x = ctx.input("X")
    ctx.set_output("Out", _reshape_target(ctx, x.shape, ctx.attrs["shape"]), x.dtype)
    ctx.set_output("XShape", xshape(x), x.dtype)


def _reshape2_case(d):
    x_shape = d.shape(1, 4, 1, 5)
    factors = [f for n in x_shape for f in ((2, 2) if n == 4 else (n,)) if f > 1]
    target = [1] * d.integer(1, 4)
    for f in factors:
        target[d.integer(0, len(target) - 1)] *= f
    for i in range(min(len(target), len(x_shape))):
        if target[i] == x_shape[i] and d.boolean():
            target[i] = 0
    if d.boolean():
        target[d.integer(0, len(target) - 1)] = -1
    return {"X": d.floats(x_shape)}, {"shape": target}


def _transpose2_shape(ctx):
    x, axis = ctx.input("X"), ctx.attrs["axis"]
    rank = len(x.shape)
    if sorted(a % rank if -rank <= a < 0 else a for a in axis) != list(range(rank)):
        raise ctx.error(f"attribute axis={list(axis)} must be a permutation of the {rank} dims "
                        f"of X {fmt(x.shape)} (negative axes count from the end)")
    ctx.set_output("Out", tuple(x.shape[a] for a in axis), x.dtype)
    ctx.set_output("XShape", xshape(x), x.dtype)


def _transpose2_case(d):
    x_shape = d.shape(1, 4, 1, 5)
    rank = len(x_shape)
    axis = list(range(rank))
    for i in range(rank - 1, 0, -1):
        j = d.integer(0, i)
        axis[i], axis[j] = axis[j], axis[i]
    axis = [a - rank if d.boolean() else a for a in axis]
    return {"X": d.floats(x_shape)}, {"axis": axis}


XSHAPE = Slot("XShape", "(0,) + X.shape: X's shape for the gradient, no data", intermediate=True)

register_op("assign", inputs=["X"], outputs=["Out"], infer_shape=same_as("X"), grad=GradOp(),
            case=_assign_case, doc="Out = a copy of X.")

register_op(
    "reshape2",
    inputs=["X", Slot("Shape", "target shape as a 1-D int tensor", dispensable=True),
            Slot("ShapeTensor", "target shape as 1-element tensors", duplicable=True,
                 dispensable=True)],
    outputs=["Out", XSHAPE],
    attrs=[Attr("shape", INTS, None, "target shape: 0 copies X's dim, one -1 is inferred"),
           Attr("use_quantizer", BOOLEAN, False, "oneDNN quantization hint (no effect here)")],
    infer_shape=_reshape2_shape,
    grad=GradOp(reads=["XShape"], no_need_buffer=["XShape"], grads=("X",)),
    case=_reshape2_case, doc="Out = X with shape ``shape`` (same elements, row-major order).")

register_op(
    "transpose2", inputs=["X"], outputs=["Out", XSHAPE],
    attrs=[Attr("axis", INTS, None, "permutation: Out dim i is X dim axis[i]")],
    infer_shape=_transpose2_shape,
    grad=GradOp(reads=["XShape"], no_need_buffer=["XShape"]),
    case=_transpose2_case, doc="Out = X with dims permuted: Out.shape[i] = X.shape[axis[i]].")


# ---- cast ----

def _cast_shape(ctx):
    x, in_dtype = ctx.input("X"), ctx.attrs["in_dtype"]
    if in_dtype not in (-1, x.dtype):
        raise ctx.error(f"attribute in_dtype={in_dtype} ({dtypes.name(in_dtype)}) does not "
                        f"match X ({x.name}), which is {dtypes.name(x.dtype)}: expected -1 or "
                        f"X's dtype")
    ctx.set_output("Out", x.shape, ctx.attrs["out_dtype"])


def _cast_case(d):
    """float64 X to a float64 or integer/bool Out, or int64 X to anything. Outputs of lower
    float precision are left to the forward check in float32: a central difference through a
    float32 rounding is noise."""
    shape = d.shape(0, 4)
    if d.integer(0, 3) == 0:
        return ({"X": d.ints(shape, -5, 5)},
                {"in_dtype": d.choice((-1, dtypes.INT64)), "out_dtype": d.choice(dtypes.ALL)})
    out_dtype = d.choice((dtypes.FP64, dtypes.INT64, dtypes.INT32, dtypes.BOOL))
    return {"X": d.floats(shape, -4.0, 4.0)}, {"out_dtype": out_dtype}


register_op(
    "cast", inputs=["X"], outputs=["Out"],
    attrs=[Attr("in_dtype", INT, -1, "VarType of X, or -1 (X's own dtype)",
                check=OneOf(-1, *dtypes.ALL)),
           Attr("out_dtype", INT, None, "VarType of Out", check=OneOf(*dtypes.ALL))],
    infer_shape=_cast_shape, grad=GradOp(reads=["X"], no_need_buffer=["X"]), case=_cast_case,
    doc="Out = X converted to out_dtype (floats to integers truncate toward zero). Its gradient "
        "is Out@GRAD cast back to X's dtype when both are floating; none flows through "
        "integers.")
