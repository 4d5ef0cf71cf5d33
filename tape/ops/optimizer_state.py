"""What every optimizer op shares: the Param, Grad and LearningRate slots, MasterParam and
``multi_precision``, the checks that state is shaped like Param, and the test case of a
parameter."""
import math

from .. import dtypes
from ..attribute import BOOLEAN, Attr
from ..registry import Slot
from .rules import fmt, require_float, require_same_dtype


def same_shape(a, b) -> bool:
    """Equal shapes, an unknown (-1) dim matching any."""
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def require_like_param(ctx, slot: str) -> None:
    param, other = ctx.input("Param"), ctx.input(slot)
    if not same_shape(param.shape, other.shape):
        raise ctx.error(f"{slot} {fmt(other.shape)} must have the shape of Param "
                        f"{fmt(param.shape)}")


def require_one_element(ctx, slot: str, floating: bool = True) -> None:
    d = ctx.input(slot)
    if floating:
        require_float(ctx, slot, d)
    if -1 not in d.shape and math.prod(d.shape) != 1:
        raise ctx.error(f"{slot} must hold one element, received shape {fmt(d.shape)}")


def param_shape(ctx) -> int:
    """Check Param, Grad, LearningRate and MasterParam (given exactly when multi_precision) and
    set ParamOut / MasterParamOut. Returns the dtype the update runs in: MasterParam's if given,
    else Param's (the optimizer state must have it)."""
    param = ctx.input("Param")
    require_float(ctx, "Param", param)
    require_same_dtype(ctx, "Param", "Grad")
    require_like_param(ctx, "Grad")
    require_one_element(ctx, "LearningRate")
    ctx.set_output("ParamOut", param.shape, param.dtype)
    multi_precision = ctx.attrs["multi_precision"]
    if ctx.has_input("MasterParam") != multi_precision:
        raise ctx.error(f"MasterParam must be given exactly when multi_precision is true, "
                        f"received multi_precision={multi_precision} with MasterParam "
                        f"{'given' if not multi_precision else 'missing'}")
    if not multi_precision:
        return param.dtype
    master = ctx.input("MasterParam")
    require_float(ctx, "MasterParam", master)
    require_like_param(ctx, "MasterParam")
    ctx.set_output("MasterParamOut", master.shape, master.dtype)
    return master.dtype


def state_shape(ctx, slot: str, dtype: int) -> None:
    """A per-element state input (Velocity, Moment1, ...): Param's shape, the update's dtype;
    sets ``<slot>Out`` alike."""
    state = ctx.input(slot)
    require_like_param(ctx, slot)
    if state.dtype != dtype:
        raise ctx.error(f"{slot} ({state.name}) must be {dtypes.name(dtype)} (the dtype of "
                        f"{'MasterParam' if ctx.attrs['multi_precision'] else 'Param'}), "
                        f"received {dtypes.name(state.dtype)}")
    ctx.set_output(slot + "Out", state.shape, state.dtype)


MULTI_PRECISION = Attr("multi_precision", BOOLEAN, False,
                        "update MasterParam, then ParamOut = MasterParamOut cast to Param's dtype")
PARAM_INPUTS = [Slot("Param", "the parameter"), Slot("Grad", "gradient, shaped like Param"),
                 Slot("LearningRate", "1 element")]
MASTER_PARAM = Slot("MasterParam", "higher-precision copy of Param (multi_precision)",
                     dispensable=True)
PARAM_OUT = Slot("ParamOut", "the updated Param (the same variable)")
MASTER_PARAM_OUT = Slot("MasterParamOut", "the updated MasterParam (the same variable)",
                         dispensable=True)


def param_case(d, max_rate=0.1):
    """``(shape, inputs, attrs)``: Param, Grad, LearningRate of a drawn shape; MasterParam and
    multi_precision half the time.

    |Param| >= 1.5 and a small rate keep each step well below the parameter, as in training: a
    step that cancels the parameter would leave float32 rounding of the O(1) terms in a near-zero
    result, beyond the relative tolerance of the float32 forward check."""
    shape = d.shape(1, 4, 1, 5)
    inputs = {"Param": parameter(d, shape), "LearningRate": d.floats((1,), 0.001, max_rate),
              "Grad": d.floats(shape)}
    if not d.boolean():
        return shape, inputs, {}
    inputs["MasterParam"] = parameter(d, shape)
    return shape, inputs, {"multi_precision": True}


def parameter(d, shape):
    return d.floats(shape, -3.0, 3.0, away_from=[0.0], margin=1.5)
