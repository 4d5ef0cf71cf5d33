"""Comparisons (less_than, less_equal, greater_than, greater_equal, equal, not_equal),
logical_not and where.

A comparison broadcasts Y into X as the elementwise ops do (Paddle's ``axis`` rule, which is what
Paddle 3.3.1's compare kernel follows), gives a bool Out and has no gradient. Paddle 3.3.1's
shape inference for them broadcasts numpy-style, trailing dims first, whatever ``axis`` says: a
Y that fits only at ``axis`` (a (3,) Y in a (2, 3, 4) X at axis=1) runs here but is rejected by
Paddle. ``where`` takes Condition, X and Y of one shape, as Paddle's op does (its Python API
broadcasts them before adding the op).
"""
from .. import dtypes
from ..attribute import BOOLEAN, Attr
from ..registry import GradOp, Slot, register_op
from .elementwise import AXIS, broadcast_case
from .rules import broadcast, fmt, require_dtype, require_same_dtype, same_dim


def _compare_shape(ctx):
    require_same_dtype(ctx, "X", "Y")
    ctx.set_output("Out", broadcast(ctx, "X", "Y", ctx.attrs["axis"]), dtypes.BOOL)


def _compare_case(d):
    """The elementwise broadcast case on values in -2..2, so that ties are common; float64,
    int64 or bool (nonzero is True)."""
    inputs, attrs = broadcast_case(d)
    kind = d.choice(("float64", "int64", "bool"))
    return {slot: d.ints(x.shape, -2, 2).astype(kind) for slot, x in inputs.items()}, attrs


_FORCE_CPU = Attr("force_cpu", BOOLEAN, False, "Paddle's: keep Out on the host (ignored: Out "
                  "is on the inputs' place)")

for _type, _symbol in (("less_than", "<"), ("less_equal", "<="), ("greater_than", ">"),
                       ("greater_equal", ">="), ("equal", "=="), ("not_equal", "!=")):
    register_op(_type, inputs=["X", "Y"], outputs=["Out"], attrs=[AXIS, _FORCE_CPU],
                infer_shape=_compare_shape, case=_compare_case,
                doc=f"Out = X {_symbol} Y elementwise, bool; Y broadcast into X as in "
                    f"elementwise_add (axis). X and Y share a dtype; NaN compares unequal to "
                    f"everything. No gradient.")


# ---- logical_not ----

def _logical_not_shape(ctx):
    ctx.set_output("Out", ctx.input("X").shape, dtypes.BOOL)


def _logical_not_case(d):
    shape = d.shape(0, 3)
    return {"X": d.ints(shape, -1, 1).astype(d.choice(("bool", "int64", "float64")))}, {}


register_op("logical_not", inputs=["X"], outputs=["Out"],
            infer_shape=_logical_not_shape,
            case=_logical_not_case,
            doc="Out = not X elementwise, bool (nonzero is True). No gradient.")


# ---- where ----

def _where_shape(ctx):
    require_dtype(ctx, "Condition", dtypes.BOOL)
    require_same_dtype(ctx, "X", "Y")
    condition = ctx.input("Condition")
    shape = condition.shape
    for slot in ("X", "Y"):
        d = ctx.input(slot)
        merged = [same_dim(a, b) for a, b in zip(shape, d.shape)]
        if len(d.shape) != len(shape) or None in merged:
            raise ctx.error(f"Condition ({condition.name}) has shape {fmt(condition.shape)} but "
                            f"{slot} ({d.name}) has {fmt(d.shape)}: expected the same shape "
                            f"(where does not broadcast; broadcast the inputs first)")
        shape = tuple(merged)
    ctx.set_output("Out", shape, ctx.input("X").dtype)


def _where_case(d):
    """Either branch about half the time (integer X and Y: tests/test_compare_ops.py)."""
    shape = d.shape(0, 3)
    return {"Condition": d.ints(shape, 0, 1).astype(bool), "X": d.floats(shape),
            "Y": d.floats(shape)}, {}


register_op(
    "where",
    inputs=[Slot("Condition", "bool, the shape of X: where to take X"),
            Slot("X", "the values where Condition is True"),
            Slot("Y", "the values where Condition is False; X's shape and dtype")],
    outputs=[Slot("Out", "X's shape and dtype")],
    infer_shape=_where_shape, case=_where_case,
    grad=GradOp(reads=["Condition", "X", "Y"], no_need_buffer=["X", "Y"], no_grad=["Condition"]),
    doc="Out = X where Condition, else Y. dX = dOut where Condition, else 0; dY = dOut where "
        "not Condition, else 0.")
