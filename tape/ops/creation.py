"""Tensor creation: fill_constant, uniform_random, gaussian_random, fill_any_like, assign_value,
range, and shape (a tensor's shape as a tensor).

A shape may be given as tensors (``ShapeTensor``, ``ShapeTensorList``) whose values only a run
knows: that is how a program builds a constant that follows the batch, from ``shape`` of a fed
variable. The shape rule then sets -1 for each dim the tensors give (the attribute ``shape``
holds -1 placeholders there and known sizes elsewhere, as Paddle writes it); the kernel reads the
sizes, and an eager output takes its value's shape.
"""
import math

import numpy as np

from .. import dtypes
from ..attribute import (
    BOOLEAN,
    FLOAT,
    INT,
    INTS,
    LONGS,
    SCALARS,
    STRING,
    AtLeast,
    Attr,
    Each,
    OneOf,
)
from ..registry import Slot, register_op
from .rules import fmt

_FLOATING = sorted(dtypes.FLOATING)
_INDEX_TYPES = (dtypes.INT32, dtypes.INT64)

SHAPE_TENSOR_SLOTS = (
    Slot("ShapeTensor", "int32/int64 1-D tensor: the shape, instead of the shape attribute",
         dispensable=True),
    Slot("ShapeTensorList", "int32/int64 1-element tensors, one per dim: the shape, instead of "
         "the shape attribute", duplicable=True, dispensable=True))


def _numel(shape):
    """The element count, or None when a dim is unknown (-1)."""
    return None if any(n < 0 for n in shape) else math.prod(shape)


def _require_index(ctx, slot: str, d, one_element: bool) -> None:
    if d.dtype not in _INDEX_TYPES:
        raise ctx.error(f"input {slot} ({d.name}) must be int32 or int64, received "
                        f"{dtypes.name(d.dtype)}")
    if one_element and _numel(d.shape) not in (1, None):
        raise ctx.error(f"input {slot} ({d.name}) must hold one element, received shape "
                        f"{fmt(d.shape)}")


def out_shape(ctx) -> tuple:
    """The output shape of an op with a ``shape`` attribute and the shape-tensor slots: -1 where
    only the tensors' values tell."""
    shape = ctx.attrs["shape"]
    if ctx.has_input("ShapeTensor"):
        given = ctx.input("ShapeTensor")
        _require_index(ctx, "ShapeTensor", given, False)
        if len(given.shape) != 1 or given.shape[0] < 0 and not shape:
            raise ctx.error(f"input ShapeTensor must be 1-D, of a known length or with the "
                            f"shape attribute giving it, received shape {fmt(given.shape)} and "
                            f"shape={list(shape)}")
        rank = given.shape[0] if given.shape[0] >= 0 else len(shape)
        return _placeholders(ctx, shape, rank, "ShapeTensor")
    tensors = ctx.inputs("ShapeTensorList")
    if tensors:
        for d in tensors:
            _require_index(ctx, "ShapeTensorList", d, True)
        return _placeholders(ctx, shape, len(tensors), "ShapeTensorList")
    if any(n < 0 for n in shape):
        raise ctx.error(f"attribute shape={list(shape)} has a -1 placeholder, which needs the "
                        f"ShapeTensor or ShapeTensorList input to give that size")
    return shape


def _placeholders(ctx, shape, rank: int, slot: str) -> tuple:
    if not shape:
        return (-1,) * rank
    if len(shape) != rank:
        raise ctx.error(f"attribute shape={list(shape)} has {len(shape)} dims but input {slot} "
                        f"gives {rank}")
    return tuple(shape)


def _shape_tensors(d, shape, rank_slot: bool):
    """(inputs, attrs) giving ``shape`` as tensors: ShapeTensor, or ShapeTensorList (0-D or
    (1,) tensors, as Paddle makes them), with -1 placeholders in the attribute or none."""
    index_dtype = d.choice((np.int32, np.int64))
    attr = [n if d.boolean() else -1 for n in shape]
    if rank_slot and d.boolean():   # the attribute gives the rank where ShapeTensor's is unknown
        return {"ShapeTensor": np.array(shape, index_dtype)}, attr
    attr = attr if d.boolean() else []
    one = d.choice(((), (1,)))
    return {"ShapeTensorList": [np.full(one, n, index_dtype) for n in shape]}, attr


# ---- fill_constant, uniform_random, gaussian_random ----

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
    ctx.set_output("Out", out_shape(ctx), dtype)


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
    if d.integer(0, 2) == 0:
        tensors, attrs["shape"] = _shape_tensors(d, attrs["shape"], True)
        inputs.update(tensors)
    return inputs, attrs


_SHAPE = Attr("shape", LONGS, (), "output shape; -1 where ShapeTensor or ShapeTensorList gives "
              "the size", check=Each(AtLeast(-1)))
_SEED = Attr("seed", INT, 0, "0: draw from the process generator; otherwise a fixed seed")


def _random_shape(ctx):
    ctx.set_output("Out", out_shape(ctx), ctx.attrs["dtype"])


def _uniform_random_shape(ctx):
    a = ctx.attrs
    if a["min"] > a["max"]:
        raise ctx.error(f"attribute min={a['min']} must be <= max={a['max']}")
    shape = out_shape(ctx)
    size = _numel(shape)
    if a["diag_num"] > 0 and size is not None and \
            (a["diag_num"] - 1) * (a["diag_step"] + 1) >= size:
        raise ctx.error(f"diag_num={a['diag_num']} with diag_step={a['diag_step']} places a "
                        f"value at flat index {(a['diag_num'] - 1) * (a['diag_step'] + 1)}, "
                        f"past the {size} elements of shape {fmt(shape)}")
    ctx.set_output("Out", shape, a["dtype"])


def _random_attrs(d):
    return {"shape": d.shape(1, 4, 1, 5), "dtype": d.choice(_FLOATING),
            "seed": d.choice((0, d.integer(1, 2**31 - 1)))}


def _with_shape_tensors(d, attrs):
    """Sometimes give a random op's shape as tensors: (inputs, attrs)."""
    if d.integer(0, 3):
        return {}, attrs
    tensors, shape = _shape_tensors(d, attrs["shape"], True)
    return tensors, {**attrs, "shape": shape, "diag_num": 0}


def _uniform_random_case(d):
    attrs = _random_attrs(d)
    attrs["min"] = d.choice((-1.0, -2.5, 0.0, 3.0))
    attrs["max"] = attrs["min"] + d.choice((0.5, 1.0, 4.0))
    if d.boolean():
        step = d.integer(0, 2)
        attrs["diag_step"] = step
        attrs["diag_num"] = d.integer(1, (math.prod(attrs["shape"]) - 1) // (step + 1) + 1)
        attrs["diag_val"] = d.choice((1.0, -7.0))
    return _with_shape_tensors(d, attrs)


def _gaussian_random_case(d):
    attrs = _random_attrs(d)
    attrs["mean"] = d.choice((0.0, -1.5, 4.0))
    attrs["std"] = d.choice((0.0, 0.5, 1.0, 3.0))
    inputs, attrs = _with_shape_tensors(d, attrs)
    attrs.pop("diag_num", None)
    return inputs, attrs


register_op(
    "fill_constant",
    inputs=[Slot("ValueTensor", "1-element tensor, instead of the value attribute",
                 dispensable=True), *SHAPE_TENSOR_SLOTS],
    outputs=["Out"],
    attrs=[Attr("dtype", INT, dtypes.FP32, "VarType of Out", check=OneOf(*dtypes.ALL)),
           _SHAPE,
           Attr("value", FLOAT, 0.0, "the constant"),
           Attr("str_value", STRING, "", "the constant as text (exact for large ints; inf, nan); "
                "overrides value"),
           Attr("force_cpu", BOOLEAN, False, "keep Out on the CPU (eager CPU: no effect)"),
           Attr("place_type", INT, -1, "place of Out; -1: the op's place")],
    infer_shape=_fill_constant_shape, case=_fill_constant_case,
    doc="Out = a tensor of ``shape`` (or the shape ShapeTensor / ShapeTensorList hold) and "
        "``dtype`` filled with ValueTensor, else str_value, else value (cast to dtype).")

register_op(
    "uniform_random", inputs=SHAPE_TENSOR_SLOTS, outputs=["Out"],
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
    "gaussian_random", inputs=SHAPE_TENSOR_SLOTS, outputs=["Out"],
    attrs=[_SHAPE, Attr("mean", FLOAT, 0.0, "mean"),
           Attr("std", FLOAT, 1.0, "standard deviation", check=AtLeast(0.0)), _SEED,
           Attr("dtype", INT, dtypes.FP32, "VarType of Out", check=OneOf(*_FLOATING))],
    infer_shape=_random_shape, case=_gaussian_random_case,
    doc="Out ~ N(mean, std^2) elementwise.")


# ---- fill_any_like, assign_value, range, shape ----

def _fill_any_like_shape(ctx):
    x, dtype, value = ctx.input("X"), ctx.attrs["dtype"], ctx.attrs["value"]
    dtype = x.dtype if dtype == -1 else dtype
    kind = dtypes.to_numpy(dtype)
    low, high = (0, 1) if kind == np.bool_ else \
        (np.iinfo(kind).min, np.iinfo(kind).max) if kind.kind in "iu" else \
        (float(np.finfo(kind).min), float(np.finfo(kind).max))
    if not low <= value <= high and math.isfinite(value):
        raise ctx.error(f"value {value} is out of range for {dtypes.name(dtype)}: expected "
                        f"[{low}, {high}]")
    ctx.set_output("Out", x.shape, dtype)


def _fill_any_like_case(d):
    dtype = d.choice((-1, *dtypes.ALL))
    small = dtype in (dtypes.BOOL, dtypes.UINT8)
    return ({"X": d.floats(d.shape(0, 4))},
            {"value": d.choice((0.0, 1.0) if small else (0.0, 1.0, -2.5, 7.0)), "dtype": dtype})


_ASSIGN_VALUE_TYPES = (dtypes.BOOL, dtypes.INT32, dtypes.INT64, dtypes.FP32, dtypes.FP64)


def _assign_value_shape(ctx):
    if ctx.has_input("ValuesTensor"):
        raise ctx.error("input ValuesTensor is not supported: expected the values in the "
                        "'values' attribute, received a tensor")
    shape, values = ctx.attrs["shape"], ctx.attrs["values"]
    if any(n < 0 for n in shape) or math.prod(shape) != len(values):
        raise ctx.error(f"attribute shape={list(shape)} must hold the {len(values)} values of "
                        f"attribute values (known, non-negative dims)")
    ctx.set_output("Out", shape, ctx.attrs["dtype"])


def _assign_value_case(d):
    dtype = d.choice(_ASSIGN_VALUE_TYPES)
    shape = d.shape(0, 3)
    n = math.prod(shape)
    if dtype == dtypes.BOOL:
        values = [d.boolean() for _ in range(n)]
    elif dtype in dtypes.FLOATING:
        values = [d.integer(-40, 40) / 8 for _ in range(n)]
    else:
        values = [d.integer(-2**31, 2**31 - 1) if d.boolean() else d.integer(-9, 9)
                  for _ in range(n)]
    return {}, {"shape": list(shape), "dtype": dtype, "values": values}


_RANGE_TYPES = (dtypes.INT32, dtypes.INT64, dtypes.FP32, dtypes.FP64)


def _range_shape(ctx):
    start = ctx.input("Start")
    for slot in ("Start", "End", "Step"):
        d = ctx.input(slot)
        if d.dtype not in _RANGE_TYPES:
            raise ctx.error(f"input {slot} ({d.name}) must be int32, int64, float32 or "
                            f"float64, received {dtypes.name(d.dtype)}")
        if _numel(d.shape) not in (1, None):
            raise ctx.error(f"input {slot} ({d.name}) must hold one element, received shape "
                            f"{fmt(d.shape)}")
    ctx.set_output("Out", (-1,), start.dtype)


def _range_case(d):
    dtype = d.choice((np.int32, np.int64, np.float64))
    step = d.choice((1, 2, 3, -1, -2)) if dtype != np.float64 else d.choice((0.5, 1.25, -0.75))
    start = d.integer(-5, 5) + (d.choice((0.0, 0.3)) if dtype == np.float64 else 0)
    end = start + step * d.integer(0, 6) + (0 if d.boolean() else step / 2 if
                                            dtype == np.float64 else 0)
    one = d.choice(((), (1,)))
    return {slot: np.full(one, v, dtype) for slot, v in
            (("Start", start), ("End", end), ("Step", step))}, {}


def _shape_shape(ctx):
    ctx.set_output("Out", (len(ctx.input("Input").shape),), dtypes.INT32)


register_op(
    "fill_any_like",
    inputs=[Slot("X", "the tensor whose shape Out takes", no_need_buffer=True)], outputs=["Out"],
    attrs=[Attr("value", FLOAT, 0.0, "the constant"),
           Attr("dtype", INT, -1, "VarType of Out; -1: X's", check=OneOf(-1, *dtypes.ALL))],
    infer_shape=_fill_any_like_shape, case=_fill_any_like_case,
    doc="Out = a tensor of X's shape filled with value, of dtype (X's when -1).")

register_op(
    "assign_value",
    inputs=[Slot("ValuesTensor", "the values as a tensor (not supported)", dispensable=True)],
    outputs=["Out"],
    attrs=[Attr("shape", INTS, (), "shape of Out", check=Each(AtLeast(0))),
           Attr("dtype", INT, dtypes.FP32, "VarType of Out", check=OneOf(*_ASSIGN_VALUE_TYPES)),
           Attr("values", SCALARS, (), "the elements of Out in row-major order")],
    infer_shape=_assign_value_shape, case=_assign_value_case,
    doc="Out = the values attribute as a tensor of shape and dtype.")

register_op(
    "range",
    inputs=[Slot("Start", "1-element tensor: the first value; its dtype is Out's"),
            Slot("End", "1-element tensor: the bound, not included"),
            Slot("Step", "1-element tensor: the spacing, nonzero")],
    outputs=["Out"], infer_shape=_range_shape, case=_range_case,
    doc="Out = Start, Start + Step, ... while before End (ceil(|End - Start| / |Step|) "
        "values, each the previous plus Step); Step must point from Start toward End.")

register_op(
    "shape", inputs=[Slot("Input", "the tensor whose shape Out gives", no_need_buffer=True)],
    outputs=["Out"],
    infer_shape=_shape_shape, case=lambda d: ({"Input": d.floats(d.shape(0, 4))}, {}),
    doc="Out = Input's shape, an int32 1-D tensor.")
