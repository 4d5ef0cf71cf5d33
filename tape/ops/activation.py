"""Activations: relu, sigmoid, tanh, exp, log, square; softmax and log_softmax along an axis."""
from ..attribute import INT, Attr
from ..registry import GradOp, register_op
from .rules import float_same_as, normalize_axis, require_float


def _unary_case(low=-2.0, high=2.0, away_from=None):
    """X of rank 1-4 with values in ``[low, high)``, kept off the kinks in ``away_from``."""
    def case(d):
        return {"X": d.floats(d.shape(1, 4), low, high, away_from=away_from)}, {}
    return case


def _unary(type: str, reads: str, doc: str, case=None) -> None:
    """An elementwise X -> Out op whose gradient reads ``reads`` (X or Out)."""
    register_op(type, inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"),
                grad=GradOp(reads=[reads]), case=case or _unary_case(), doc=doc)


_unary("relu", "Out", "Out = max(X, 0)", _unary_case(away_from=[0.0]))
_unary("sigmoid", "Out", "Out = 1 / (1 + exp(-X))", _unary_case(-6.0, 6.0))
_unary("tanh", "Out", "Out = tanh(X)")
_unary("exp", "Out", "Out = exp(X)")
_unary("log", "X", "Out = ln(X), for X > 0", _unary_case(0.1, 4.0))
_unary("square", "X", "Out = X * X")


def _softmax_shape(ctx):
    x = ctx.input("X")
    require_float(ctx, "X", x)
    if not x.shape:
        raise ctx.error(f"input X ({x.name}) must have at least one dimension to normalise "
                        f"along, received a scalar")
    normalize_axis(ctx, ctx.attrs["axis"], len(x.shape))
    ctx.set_output("Out", x.shape, x.dtype)


def _softmax_case(d):
    shape = d.shape(1, 4)
    return {"X": d.floats(shape, -3.0, 3.0)}, {"axis": d.integer(-len(shape), len(shape) - 1)}


_AXIS = Attr("axis", INT, -1, "the axis to normalise along; negative counts from the end")

for _type, _doc in (("softmax", "Out = exp(X) / sum(exp(X), axis)"),
                    ("log_softmax", "Out = X - log(sum(exp(X), axis))")):
    register_op(_type, inputs=["X"], outputs=["Out"], attrs=[_AXIS], infer_shape=_softmax_shape,
                grad=GradOp(reads=["Out"]), case=_softmax_case, doc=_doc)
