"""Optimizer updates as ops, so eager training and static programs share them: sgd, momentum,
adam, adamw, adagrad, rmsprop, adadelta, adamax, lamb.

Each writes its state in place: ParamOut is the same variable as Param, VelocityOut as Velocity,
Moment1Out as Moment1, and so on. With ``multi_precision`` the update runs on MasterParam (a
higher-precision copy) and its state has MasterParam's dtype; ParamOut is MasterParamOut cast
back. None of them has a gradient.
"""

import numpy as np

from .. import dtypes
from ..attribute import BOOLEAN, FLOAT, LONG, STRING, AtLeast, Attr, InRange, OneOf
from ..registry import Slot, register_op
from .optimizer_state import (
    MASTER_PARAM,
    MASTER_PARAM_OUT,
    MULTI_PRECISION,
    PARAM_INPUTS,
    PARAM_OUT,
    param_case,
    param_shape,
    require_one_element,
    state_shape,
)
from .rules import require_dtype

# ---- sgd ----

def _sgd_case(d):
    _, inputs, attrs = param_case(d)
    return inputs, attrs


register_op(
    "sgd",
    inputs=[PARAM_INPUTS[0], PARAM_INPUTS[2], PARAM_INPUTS[1], MASTER_PARAM],
    outputs=[PARAM_OUT, MASTER_PARAM_OUT],
    attrs=[MULTI_PRECISION],
    infer_shape=param_shape, case=_sgd_case,
    doc="ParamOut = Param - LearningRate * Grad, in place. With multi_precision: "
        "MasterParamOut = MasterParam - LearningRate * Grad and ParamOut = cast(MasterParamOut).")


# ---- momentum ----

def _momentum_shape(ctx):
    state_shape(ctx, "Velocity", param_shape(ctx))


def _momentum_case(d):
    shape, inputs, attrs = param_case(d)
    inputs["Velocity"] = d.floats(shape)
    attrs.update(mu=d.choice((0.0, 0.5, 0.9)), use_nesterov=d.boolean(),
                 regularization_method=d.choice(("", "l2_decay")),
                 regularization_coeff=d.choice((0.0, 1e-3, 0.1)),
                 rescale_grad=d.choice((1.0, 0.5, 2.0)))
    return inputs, attrs


register_op(
    "momentum",
    inputs=PARAM_INPUTS[:2] + [Slot("Velocity", "running velocity, shaped like Param"),
                                PARAM_INPUTS[2], MASTER_PARAM],
    outputs=[PARAM_OUT, Slot("VelocityOut", "the updated Velocity (the same variable)"),
             MASTER_PARAM_OUT],
    attrs=[Attr("mu", FLOAT, None, "momentum coefficient (required, as in Paddle)"),
           Attr("use_nesterov", BOOLEAN, False, "Nesterov momentum"),
           Attr("regularization_method", STRING, "", "'l2_decay' adds regularization_coeff * "
                "Param to the gradient; '' adds nothing", check=OneOf("", "l2_decay")),
           Attr("regularization_coeff", FLOAT, 0.0, "the L2 decay coefficient"),
           MULTI_PRECISION,
           Attr("rescale_grad", FLOAT, 1.0, "the gradient is multiplied by it first")],
    infer_shape=_momentum_shape, case=_momentum_case,
    doc="g = rescale_grad * Grad (+ regularization_coeff * Param with 'l2_decay'); "
        "VelocityOut = mu * Velocity + g; ParamOut = Param - LearningRate * (g + mu * "
        "VelocityOut) with use_nesterov, else Param - LearningRate * VelocityOut. In place. "
        "(Paddle's CPU kernel ignores rescale_grad; its GPU kernel and this one apply it.)")


# ---- adam, adamw ----

def _beta_powers_and_skip(ctx) -> None:
    """Adam's and Lamb's one-element Beta1Pow/Beta2Pow (their outputs take their shapes) and
    optional bool SkipUpdate."""
    for slot in ("Beta1Pow", "Beta2Pow"):
        require_one_element(ctx, slot)
        power = ctx.input(slot)
        ctx.set_output(slot + "Out", power.shape, power.dtype)
    if ctx.has_input("SkipUpdate"):
        require_one_element(ctx, "SkipUpdate", floating=False)
        require_dtype(ctx, "SkipUpdate", dtypes.BOOL)


def _adam_shape(ctx):
    dtype = param_shape(ctx)
    for slot in ("Moment1", "Moment2"):
        state_shape(ctx, slot, dtype)
    amsgrad = ctx.attrs["amsgrad"]
    if ctx.has_input("Moment2Max") != amsgrad:
        raise ctx.error(f"Moment2Max must be given exactly when amsgrad is true, received "
                        f"amsgrad={amsgrad} with Moment2Max "
                        f"{'given' if not amsgrad else 'missing'}")
    if amsgrad:
        state_shape(ctx, "Moment2Max", dtype)
    _beta_powers_and_skip(ctx)
    for slot in ("Beta1Tensor", "Beta2Tensor", "EpsilonTensor"):
        if ctx.has_input(slot):
            require_one_element(ctx, slot)


def _adam_case(d):
    # |Grad| >= 0.5 and Moment2, Moment2Max >= 0.25 bound |m| / sqrt(v) by 4, and the bias
    # correction is at most 10: with rates up to 0.02 a step stays below 0.8 (see param_case).
    shape, inputs, attrs = param_case(d, max_rate=0.02)
    inputs.update(Grad=d.floats(shape, away_from=[0.0], margin=0.5), Moment1=d.floats(shape),
                  Moment2=d.floats(shape, 0.25, 2.0), Beta1Pow=d.floats((1,), 0.05, 0.9),
                  Beta2Pow=d.floats((1,), 0.05, 0.99))
    attrs.update(beta1=d.choice((0.0, 0.5, 0.9)), beta2=d.choice((0.0, 0.9, 0.999)),
                 epsilon=d.choice((1e-8, 1e-3, 0.5)), lazy_mode=d.boolean(),
                 use_global_beta_pow=d.boolean(), amsgrad=d.boolean())
    if attrs["amsgrad"]:
        inputs["Moment2Max"] = d.floats(shape, 0.25, 2.0)
    if d.integer(0, 3) == 0:
        inputs["SkipUpdate"] = np.array([d.boolean()])
    for slot, low, high in (("Beta1Tensor", 0.0, 0.95), ("Beta2Tensor", 0.5, 0.999),
                            ("EpsilonTensor", 1e-4, 0.5)):
        if d.integer(0, 3) == 0:
            inputs[slot] = d.floats((1,), low, high)
    return inputs, attrs


def _adamw_case(d):
    inputs, attrs = _adam_case(d)
    attrs.update(lr_ratio=d.choice((1.0, 0.5)), coeff=d.choice((0.0, 0.01, 0.3)),
                 with_decay=d.boolean())
    return inputs, attrs


_ADAM_INPUTS = PARAM_INPUTS + [
    Slot("Moment1", "first moment, shaped like Param"),
    Slot("Moment2", "second moment, shaped like Param"),
    Slot("Moment2Max", "running max of Moment2 (amsgrad)", dispensable=True),
    Slot("Beta1Pow", "beta1 ** t, 1 element"), Slot("Beta2Pow", "beta2 ** t, 1 element"),
    MASTER_PARAM,
    Slot("SkipUpdate", "bool, 1 element: when true, nothing changes", dispensable=True),
    Slot("Beta1Tensor", "overrides beta1", dispensable=True),
    Slot("Beta2Tensor", "overrides beta2", dispensable=True),
    Slot("EpsilonTensor", "overrides epsilon", dispensable=True)]
_ADAM_OUTPUTS = [
    PARAM_OUT, Slot("Moment1Out", "the same variable as Moment1"),
    Slot("Moment2Out", "the same variable as Moment2"),
    Slot("Moment2MaxOut", "the same variable as Moment2Max", dispensable=True),
    Slot("Beta1PowOut", "Beta1Pow * beta1 (the same variable)"),
    Slot("Beta2PowOut", "Beta2Pow * beta2 (the same variable)"), MASTER_PARAM_OUT]
_BETA = InRange(0.0, 1.0)
_ADAM_ATTRS = [
    Attr("beta1", FLOAT, 0.9, "decay of the first moment", check=_BETA),
    Attr("beta2", FLOAT, 0.999, "decay of the second moment", check=_BETA),
    Attr("epsilon", FLOAT, 1e-8, "added to sqrt(second moment)", check=AtLeast(0.0)),
    Attr("lazy_mode", BOOLEAN, False, "update only rows of a sparse gradient (no effect on a "
         "dense one)"),
    Attr("min_row_size_to_use_multithread", LONG, 1000, "a threading hint (no effect here)"),
    MULTI_PRECISION,
    Attr("use_global_beta_pow", BOOLEAN, False, "leave Beta1Pow and Beta2Pow unchanged (they "
         "are updated elsewhere)"),
    Attr("amsgrad", BOOLEAN, False, "divide by sqrt(max over steps of the second moment)")]
_ADAM_DOC = (
    "m = beta1 * Moment1 + (1 - beta1) * Grad; v = beta2 * Moment2 + (1 - beta2) * Grad^2 "
    "(with amsgrad v = Moment2MaxOut = max(v, Moment2Max)); lr_t = LearningRate * "
    "sqrt(1 - Beta2Pow) / (1 - Beta1Pow); ParamOut = Param - lr_t * m / (sqrt(v) + epsilon * "
    "sqrt(1 - Beta2Pow)), i.e. Adam with bias-corrected moments; Beta1PowOut = Beta1Pow * beta1 "
    "and Beta2PowOut = Beta2Pow * beta2 unless use_global_beta_pow. All in place; nothing "
    "changes when SkipUpdate is true.")

register_op("adam", inputs=_ADAM_INPUTS, outputs=_ADAM_OUTPUTS, attrs=_ADAM_ATTRS,
            infer_shape=_adam_shape, case=_adam_case, doc=_ADAM_DOC)

register_op(
    "adamw", inputs=_ADAM_INPUTS, outputs=_ADAM_OUTPUTS,
    attrs=_ADAM_ATTRS[:3] + [
        Attr("lr_ratio", FLOAT, 1.0, "this parameter's learning-rate multiplier",
             check=AtLeast(0.0)),
        Attr("coeff", FLOAT, 0.01, "the decoupled weight-decay coefficient", check=AtLeast(0.0)),
        Attr("with_decay", BOOLEAN, False, "apply the weight decay")] + _ADAM_ATTRS[3:],
    infer_shape=_adam_shape, case=_adamw_case,
    doc="Adam with decoupled weight decay (Loshchilov & Hutter): with lr = LearningRate * "
        "lr_ratio, Param is first scaled by (1 - lr * coeff) when with_decay, then takes the "
        "adam step with lr. (Paddle's GPU kernel applies lr_ratio so; its CPU kernel applies it "
        "to the decay only.) " + _ADAM_DOC)


# ---- adagrad, rmsprop, adadelta, adamax, lamb ----

def _state_shapes(*slots):
    """A shape rule: Param, Grad, LearningRate (and MasterParam) checked, then each per-element
    state slot of ``slots`` (given ones only) shaped like Param, with its ``<slot>Out``."""
    def infer_shape(ctx):
        dtype = param_shape(ctx)
        for slot in slots:
            if ctx.has_input(slot):
                state_shape(ctx, slot, dtype)
    return infer_shape


def _state_case(d, *slots, low=0.25, high=2.0, max_rate=0.02):
    """``(shape, inputs, attrs)``: param_case with |Grad| >= 0.5 and the per-element state
    ``slots`` drawn in [low, high] (second moments: positive). With rates up to 0.02 a step
    stays well below the parameter (see param_case)."""
    shape, inputs, attrs = param_case(d, max_rate=max_rate)
    inputs["Grad"] = d.floats(shape, away_from=[0.0], margin=0.5)
    inputs.update({slot: d.floats(shape, low, high) for slot in slots})
    return shape, inputs, attrs


def _epsilon(default):
    return Attr("epsilon", FLOAT, default, "keeps the division finite", check=AtLeast(0.0))


def _outputs(*slots):
    return [PARAM_OUT, *(Slot(f"{slot}Out", f"the same variable as {slot}") for slot in slots),
            MASTER_PARAM_OUT]


def _adagrad_case(d):
    _, inputs, attrs = _state_case(d, "Moment")
    attrs["epsilon"] = d.choice((1e-6, 0.1))
    return inputs, attrs


register_op(
    "adagrad",
    inputs=PARAM_INPUTS[:2] + [Slot("Moment", "sum of squared gradients, shaped like Param"),
                                PARAM_INPUTS[2], MASTER_PARAM],
    outputs=_outputs("Moment"),
    attrs=[_epsilon(1e-6), MULTI_PRECISION],
    infer_shape=_state_shapes("Moment"), case=_adagrad_case,
    doc="MomentOut = Moment + Grad^2; ParamOut = Param - LearningRate * Grad / "
        "(sqrt(MomentOut) + epsilon). In place.")


def _rmsprop_case(d):
    shape, inputs, attrs = _state_case(d, "MeanSquare")
    centered = d.boolean()
    inputs["Moment"] = d.floats(shape, -0.1, 0.1)
    if centered or d.boolean():
        # |MeanGrad| <= 0.3 keeps MeanSquare - MeanGrad^2 >= 0.16 (see param_case)
        inputs["MeanGrad"] = d.floats(shape, -0.3, 0.3)
    # decay 0 would leave a centered variance of 0
    attrs.update(epsilon=d.choice((1e-10, 1e-3)),
                 decay=d.choice((0.9, 0.99) if centered else (0.0, 0.9, 0.99)),
                 momentum=d.choice((0.0, 0.5, 0.9)), centered=centered)
    return inputs, attrs


def _rmsprop_shape(ctx):
    if ctx.attrs["centered"] and not ctx.has_input("MeanGrad"):
        raise ctx.error("MeanGrad must be given when centered is true")
    _state_shapes("MeanSquare", "Moment", "MeanGrad")(ctx)


register_op(
    "rmsprop",
    inputs=[PARAM_INPUTS[0], Slot("MeanSquare", "running mean of Grad^2, shaped like Param"),
            PARAM_INPUTS[1], Slot("Moment", "running step, shaped like Param"),
            PARAM_INPUTS[2],
            Slot("MeanGrad", "running mean of Grad (centered), shaped like Param",
                 dispensable=True), MASTER_PARAM],
    outputs=[PARAM_OUT, Slot("MomentOut", "the same variable as Moment"),
             Slot("MeanSquareOut", "the same variable as MeanSquare"),
             Slot("MeanGradOut", "the same variable as MeanGrad (given with MeanGrad)",
                  dispensable=True), MASTER_PARAM_OUT],
    attrs=[_epsilon(1e-10), Attr("decay", FLOAT, 0.9, "decay of the running means",
                                 check=InRange(0.0, 1.0)),
           Attr("momentum", FLOAT, 0.0, "momentum of the step", check=AtLeast(0.0)),
           Attr("centered", BOOLEAN, False, "divide by the variance of Grad, not its mean "
                "square"), MULTI_PRECISION],
    infer_shape=_rmsprop_shape, case=_rmsprop_case,
    doc="MeanSquareOut = decay * MeanSquare + (1 - decay) * Grad^2; with centered, "
        "MeanGradOut = decay * MeanGrad + (1 - decay) * Grad and v = MeanSquareOut - "
        "MeanGradOut^2, else v = MeanSquareOut (MeanGradOut = MeanGrad); MomentOut = momentum * "
        "Moment + LearningRate * Grad / sqrt(v + epsilon); ParamOut = Param - MomentOut. In "
        "place.")


def _adadelta_case(d):
    _, inputs, attrs = _state_case(d, "AvgSquaredGrad", "AvgSquaredUpdate", low=0.05, high=1.0)
    attrs.update(rho=d.choice((0.0, 0.9, 0.95)), epsilon=d.choice((1e-6, 1e-2)))
    return inputs, attrs


register_op(
    "adadelta",
    inputs=PARAM_INPUTS[:2] + [
        Slot("AvgSquaredGrad", "running mean of Grad^2, shaped like Param"),
        Slot("AvgSquaredUpdate", "running mean of the squared steps, shaped like Param"),
        PARAM_INPUTS[2], MASTER_PARAM],
    outputs=_outputs("AvgSquaredGrad", "AvgSquaredUpdate"),
    attrs=[Attr("rho", FLOAT, 0.95, "decay of the running means", check=InRange(0.0, 1.0)),
           _epsilon(1e-6), MULTI_PRECISION],
    infer_shape=_state_shapes("AvgSquaredGrad", "AvgSquaredUpdate"), case=_adadelta_case,
    doc="AvgSquaredGradOut = rho * AvgSquaredGrad + (1 - rho) * Grad^2; update = "
        "-sqrt((AvgSquaredUpdate + epsilon) / (AvgSquaredGradOut + epsilon)) * Grad; "
        "AvgSquaredUpdateOut = rho * AvgSquaredUpdate + (1 - rho) * update^2; ParamOut = "
        "Param + LearningRate * update. In place.")


def _adamax_shape(ctx):
    _state_shapes("Moment", "InfNorm")(ctx)
    require_one_element(ctx, "Beta1Pow")


def _adamax_case(d):
    shape, inputs, attrs = _state_case(d, "InfNorm")
    inputs.update(Moment=d.floats(shape), Beta1Pow=d.floats((1,), 0.05, 0.9))
    attrs.update(beta1=d.choice((0.0, 0.5, 0.9)), beta2=d.choice((0.0, 0.9, 0.999)),
                 epsilon=d.choice((1e-8, 1e-3)))
    return inputs, attrs


register_op(
    "adamax",
    inputs=PARAM_INPUTS + [Slot("Moment", "first moment, shaped like Param"),
                            Slot("InfNorm", "running max of |Grad|, shaped like Param"),
                            Slot("Beta1Pow", "beta1 ** t, 1 element"), MASTER_PARAM],
    outputs=_outputs("Moment", "InfNorm"),
    attrs=_ADAM_ATTRS[:2] + [_epsilon(1e-8), MULTI_PRECISION],
    infer_shape=_adamax_shape, case=_adamax_case,
    doc="MomentOut = beta1 * Moment + (1 - beta1) * Grad; InfNormOut = max(beta2 * InfNorm + "
        "epsilon, |Grad|); ParamOut = Param - LearningRate / (1 - Beta1Pow) * MomentOut / "
        "InfNormOut. In place; Beta1Pow is left as it is (the optimizer scales it).")


def _lamb_shape(ctx):
    _state_shapes("Moment1", "Moment2")(ctx)
    _beta_powers_and_skip(ctx)


def _lamb_case(d):
    # the trust ratio scales the step to ||Param||: a smaller rate keeps it below each element
    shape, inputs, attrs = _state_case(d, "Moment2", max_rate=0.005)
    inputs.update(Moment1=d.floats(shape), Beta1Pow=d.floats((1,), 0.05, 0.9),
                  Beta2Pow=d.floats((1,), 0.05, 0.99))
    if d.integer(0, 3) == 0:
        inputs["SkipUpdate"] = np.array([d.boolean()])
    attrs.update(weight_decay=d.choice((0.0, 0.01, 0.1)), beta1=d.choice((0.0, 0.9)),
                 beta2=d.choice((0.0, 0.999)), epsilon=d.choice((1e-6, 1e-3)),
                 always_adapt=d.boolean())
    return inputs, attrs


register_op(
    "lamb",
    inputs=PARAM_INPUTS + [Slot("Moment1", "first moment, shaped like Param"),
                            Slot("Moment2", "second moment, shaped like Param"),
                            Slot("Beta1Pow", "beta1 ** t, 1 element"),
                            Slot("Beta2Pow", "beta2 ** t, 1 element"), MASTER_PARAM,
                            Slot("SkipUpdate", "bool, 1 element: when true, nothing changes",
                                 dispensable=True)],
    outputs=[PARAM_OUT, Slot("Moment1Out", "the same variable as Moment1"),
             Slot("Moment2Out", "the same variable as Moment2"),
             Slot("Beta1PowOut", "Beta1Pow * beta1 (the same variable)", dispensable=True),
             Slot("Beta2PowOut", "Beta2Pow * beta2 (the same variable)", dispensable=True),
             MASTER_PARAM_OUT],
    attrs=[Attr("weight_decay", FLOAT, None, "decoupled weight decay (required, as in Paddle)",
                check=AtLeast(0.0))] + _ADAM_ATTRS[:2] + [
        _epsilon(1e-6),
        Attr("always_adapt", BOOLEAN, False, "scale the step by the trust ratio even when "
             "weight_decay is 0"), MULTI_PRECISION],
    infer_shape=_lamb_shape, case=_lamb_case,
    doc="LAMB (You et al.): m = beta1 * Moment1 + (1 - beta1) * Grad; v = beta2 * Moment2 + "
        "(1 - beta2) * Grad^2; r = (m / (1 - Beta1Pow)) / (sqrt(v / (1 - Beta2Pow)) + epsilon) "
        "+ weight_decay * Param; ratio = ||Param|| / ||r|| when both are positive (and "
        "weight_decay > 0 or always_adapt), else 1; ParamOut = Param - LearningRate * ratio * "
        "r; Beta1PowOut = Beta1Pow * beta1, Beta2PowOut = Beta2Pow * beta2. In place; nothing "
        "changes when SkipUpdate is true.")
