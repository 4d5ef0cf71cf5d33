"""Tensor creation and layout: fill_constant, uniform_random, gaussian_random, assign, reshape2,
transpose2."""
import math

import numpy as np

from .. import dtypes
from ..attribute import BOOLEAN, FLOAT, INT, INTS, LONGS, STRING, AtLeast, Attr, Each, OneOf
from ..registry import GradOp, Slot, register_op
from .rules import fmt, same_as, xshape

_FLOATING = sorted(dtypes.FLOATING)

# Shape tensors carry a shape only known at run time; the eager tape must know it at shape
# inference, so these slots exist for program compatibility and are rejected when given.
_SHAPE_TENSOR_SLOTS = (Slot("ShapeTensor", "int shape (1-D), instead of the shape attribute",
                            dispensable=True),
                       Slot("ShapeTensorList", "int shape as 1-element tensors",
                            duplicable=True, dispensable=True))


def _numel(shape):
    """The element count, or None when a dim is unknown (-1)."""
    return None if any(n < 0 for n in shape) else math.prod(shape)


def _shape_attr(ctx) -> tuple:
    for slot in ("ShapeTensor", "ShapeTensorList"):
        if ctx.has_input(slot):
            raise ctx.error(f"input {slot} is not supported: expected the shape in the 'shape' "
                            f"attribute, received a tensor")
    return ctx.attrs["shape"]


# ---- creation ----

def _fill_constant_shape(ctx):
    dtype, str_value = ctx.attrs["dtype"], ctx.attrs["str_value"]
    value = ctx.attrs["value"]
    if str_value:
        try:
            value = float(str_value)
        except ValueError:
            raise ctx.error(f"attribute str_value must spell a number (or inf, -inf, nan), "
                            f"received {str_value!r}") from None
    if ctx.has_input("ValueTensor"):
        given = ctx.input("ValueTensor")
        if _numel(given.shape) not in (1, None):
            raise ctx.error(f"input ValueTensor must hold one element, received shape "
                            f"{fmt(given.shape)}")
    elif dtype not in dtypes.FLOATING and not math.isfinite(value):
        raise ctx.error(f"value {value} cannot be stored as {dtypes.name(dtype)}: expected a "
                        f"finite value for a non-floating dtype")
    ctx.set_output("Out", _shape_attr(ctx), dtype)


def _fill_constant_case(d):
    dtype = d.choice(dtypes.ALL)
    value = d.integer(-3, 3) + d.choice((0.0, 0.25, 0.5))
    if dtype in (dtypes.BOOL, dtypes.UINT8):
        value = abs(value)
    attrs = {"shape": d.shape(0, 4, 1, 5), "dtype": dtype, "value": value}
    inputs = {}
    how = d.integer(0, 3)
    if how == 1:
        attrs["str_value"] = d.choice(("inf", "-inf", "nan", repr(value))) \
            if dtype in dtypes.FLOATING else str(int(value))
    elif how == 2:
        inputs["ValueTensor"] = np.array([d.choice((0.5, 1.25, 2.75))])
    return inputs, attrs


_SHAPE = Attr("shape", LONGS, (), "output shape", check=Each(AtLeast(0)))
_SEED = Attr("seed", INT, 0, "0: draw from the process generator; otherwise a fixed seed")


def _random_shape(ctx):
    ctx.set_output("Out", _shape_attr(ctx), ctx.attrs["dtype"])


def _uniform_random_shape(ctx):
    a = ctx.attrs
    if a["min"] > a["max"]:
        raise ctx.error(f"attribute min={a['min']} must be <= max={a['max']}")
    size = math.prod(a["shape"])
    if a["diag_num"] > 0 and (a["diag_num"] - 1) * (a["diag_step"] + 1) >= size:
        raise ctx.error(f"diag_num={a['diag_num']} with diag_step={a['diag_step']} places a "
                        f"value at flat index {(a['diag_num'] - 1) * (a['diag_step'] + 1)}, "
                        f"past the {size} elements of shape {fmt(a['shape'])}")
    _random_shape(ctx)


def _random_attrs(d):
    return {"shape": d.shape(1, 4, 1, 5), "dtype": d.choice(_FLOATING),
            "seed": d.choice((0, d.integer(1, 2**31 - 1)))}


def _uniform_random_case(d):
    attrs = _random_attrs(d)
    attrs["min"] = d.choice((-1.0, -2.5, 0.0, 3.0))
    attrs["max"] = attrs["min"] + d.choice((0.5, 1.0, 4.0))
    if d.boolean():
        step = d.integer(0, 2)
        attrs["diag_step"] = step
        attrs["diag_num"] = d.integer(1, (math.prod(attrs["shape"]) - 1) // (step + 1) + 1)
        attrs["diag_val"] = d.choice((1.0, -7.0))
    return {}, attrs


def _gaussian_random_case(d):
    attrs = _random_attrs(d)
    attrs["mean"] = d.choice((0.0, -1.5, 4.0))
    attrs["std"] = d.choice((0.0, 0.5, 1.0, 3.0))
    return {}, attrs


register_op(
    "fill_constant",
    inputs=[Slot("ValueTensor", "1-element tensor, instead of the value attribute",
                 dispensable=True), *_SHAPE_TENSOR_SLOTS],
    outputs=["Out"],
    attrs=[Attr("dtype", INT, dtypes.FP32, "VarType of Out", check=OneOf(*dtypes.ALL)),
           _SHAPE,
           Attr("value", FLOAT, 0.0, "the constant"),
           Attr("str_value", STRING, "", "the constant as text (exact for large ints; inf, nan); "
                "overrides value"),
           Attr("force_cpu", BOOLEAN, False, "keep Out on the CPU (eager CPU: no effect)"),
           Attr("place_type", INT, -1, "place of Out; -1: the op's place")],
    infer_shape=_fill_constant_shape, case=_fill_constant_case,
    doc="Out = a tensor of ``shape`` and ``dtype`` filled with ValueTensor, else str_value, "
        "else value (cast to dtype).")

register_op(
    "uniform_random", inputs=_SHAPE_TENSOR_SLOTS, outputs=["Out"],
    attrs=[_SHAPE, Attr("dtype", INT, dtypes.FP32, "VarType of Out", check=OneOf(*_FLOATING)),
           Attr("min", FLOAT, -1.0, "lower bound"), Attr("max", FLOAT, 1.0, "upper bound"),
           _SEED,
           Attr("diag_num", INT, 0, "how many flat positions get diag_val", check=AtLeast(0)),
           Attr("diag_step", INT, 0, "gap between those positions", check=AtLeast(0)),
           Attr("diag_val", FLOAT, 1.0, "the value placed there")],
    infer_shape=_uniform_random_shape, case=_uniform_random_case,
    doc="Out ~ U[min, max) elementwise; then Out.flat[i * (diag_step + 1)] = diag_val for "
        "i < diag_num.")

register_op(
    "gaussian_random", inputs=_SHAPE_TENSOR_SLOTS, outputs=["Out"],
    attrs=[_SHAPE, Attr("mean", FLOAT, 0.0, "mean"),
           Attr("std", FLOAT, 1.0, "standard deviation", check=AtLeast(0.0)), _SEED,
           Attr("dtype", INT, dtypes.FP32, "VarType of Out", check=OneOf(*_FLOATING))],
    infer_shape=_random_shape, case=_gaussian_random_case,
    doc="Out ~ N(mean, std^2) elementwise.")


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
