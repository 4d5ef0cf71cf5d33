"""Optimizer updates as ops, so eager training and static programs share them: sgd.

Each writes its parameter in place: ParamOut is the same variable as Param."""
import math

from ..attribute import BOOLEAN, Attr
from ..registry import Slot, register_op
from .rules import fmt, require_float, require_same_dtype


def _same_shape(a, b) -> bool:
    """Equal shapes, an unknown (-1) dim matching any."""
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def _require_like_param(ctx, slot: str) -> None:
    param, other = ctx.input("Param"), ctx.input(slot)
    if not _same_shape(param.shape, other.shape):
        raise ctx.error(f"{slot} {fmt(other.shape)} must have the shape of Param "
                        f"{fmt(param.shape)}")


def _sgd_shape(ctx):
    param, lr = ctx.input("Param"), ctx.input("LearningRate")
    require_float(ctx, "Param", param)
    require_same_dtype(ctx, "Param", "Grad")
    _require_like_param(ctx, "Grad")
    require_float(ctx, "LearningRate", lr)
    if -1 not in lr.shape and math.prod(lr.shape) != 1:
        raise ctx.error(f"LearningRate must hold one element, received shape {fmt(lr.shape)}")
    ctx.set_output("ParamOut", param.shape, param.dtype)
    multi_precision = ctx.attrs["multi_precision"]
    if ctx.has_input("MasterParam") != multi_precision:
        raise ctx.error(f"MasterParam must be given exactly when multi_precision is true, "
                        f"received multi_precision={multi_precision} with MasterParam "
                        f"{'given' if not multi_precision else 'missing'}")
    if multi_precision:
        master = ctx.input("MasterParam")
        require_float(ctx, "MasterParam", master)
        _require_like_param(ctx, "MasterParam")
        ctx.set_output("MasterParamOut", master.shape, master.dtype)


def _sgd_case(d):
    shape = d.shape(1, 4, 1, 5)
    inputs = {"Param": d.floats(shape), "LearningRate": d.floats((1,), 0.01, 1.0),
              "Grad": d.floats(shape)}
    if not d.boolean():
        return inputs, {}
    inputs["MasterParam"] = d.floats(shape)
    return inputs, {"multi_precision": True}


register_op(
    "sgd",
    inputs=[Slot("Param", "the parameter"), Slot("LearningRate", "1 element"),
            Slot("Grad", "gradient, shaped like Param"),
            Slot("MasterParam", "higher-precision copy of Param (multi_precision)",
                 dispensable=True)],
    outputs=[Slot("ParamOut", "the updated Param (the same variable)"),
             Slot("MasterParamOut", "the updated MasterParam (the same variable)",
                  dispensable=True)],
    attrs=[Attr("multi_precision", BOOLEAN, False,
                "update MasterParam, then ParamOut = MasterParamOut cast to Param's dtype")],
    infer_shape=_sgd_shape, case=_sgd_case,
    doc="ParamOut = Param - LearningRate * Grad, in place. With multi_precision: "
        "MasterParamOut = MasterParam - LearningRate * Grad and ParamOut = cast(MasterParamOut).")
