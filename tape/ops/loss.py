"""Classification losses: cross_entropy on probabilities, softmax_with_cross_entropy on logits."""
import numpy as np

from .. import dtypes
from ..attribute import BOOLEAN, INT, Attr
from ..registry import GradOp, Slot, register_op
from .rules import fmt, normalize_axis, require_float, require_same_dtype

_HARD_LABEL_TYPES = (dtypes.INT64, dtypes.INT32)


def _require_classes(ctx, slot: str):
    """The input of ``slot``, which must be floating with at least one (class) dimension."""
    x = ctx.input(slot)
    require_float(ctx, slot, x)
    if not x.shape:
        raise ctx.error(f"input {slot} ({x.name}) must have a class dimension, received a scalar")
    return x


def _check_label(ctx, x_slot: str, hard_shape: tuple, axis: int) -> None:
    """Soft labels must match ``x_slot`` in shape and dtype; hard ones are int64 or int32 class
    indices of ``hard_shape``. Dims of -1 (unknown) match anything."""
    x, label = ctx.input(x_slot), ctx.input("Label")
    soft = ctx.attrs["soft_label"]
    if soft:
        require_same_dtype(ctx, x_slot, "Label")
        expected = x.shape
    elif label.dtype not in _HARD_LABEL_TYPES:
        raise ctx.error(f"input Label ({label.name}) must be int64 or int32 class indices when "
                        f"soft_label=False, received {dtypes.name(label.dtype)}")
    else:
        expected = hard_shape
    if len(label.shape) != len(expected) or any(
            a != b and a != -1 and b != -1 for a, b in zip(label.shape, expected)):
        kind = "probabilities of the same shape" if soft else "1 class index per row"
        raise ctx.error(f"Label {fmt(label.shape)} does not fit {x_slot} {fmt(x.shape)}: "
                        f"expected {fmt(expected)} ({kind}; soft_label={soft}, axis={axis})")


def _cross_entropy_shape(ctx):
    x = _require_classes(ctx, "X")
    label = ctx.input("Label")
    # Paddle also takes hard labels without the trailing 1: X.shape[:-1].
    squeezed = not ctx.attrs["soft_label"] and len(label.shape) == len(x.shape) - 1
    y_shape = x.shape[:-1] if squeezed else x.shape[:-1] + (1,)
    _check_label(ctx, "X", y_shape, -1)
    ctx.set_output("Y", y_shape, x.dtype)


def _softmax_with_cross_entropy_shape(ctx):
    logits = _require_classes(ctx, "Logits")
    rank = len(logits.shape)
    axis = normalize_axis(ctx, ctx.attrs["axis"], rank)
    if axis != rank - 1 and not ctx.attrs["numeric_stable_mode"]:
        raise ctx.error(f"attribute axis={ctx.attrs['axis']} must be the last axis (-1) when "
                        f"numeric_stable_mode=False (as in Paddle)")
    loss_shape = logits.shape[:axis] + (1,) + logits.shape[axis + 1:]
    _check_label(ctx, "Logits", loss_shape, ctx.attrs["axis"])
    ctx.set_output("Softmax", logits.shape, logits.dtype)
    ctx.set_output("Loss", loss_shape, logits.dtype)


# ---- test cases ----

def _probabilities(d, shape, axis=-1):
    """Positive values summing to 1 along ``axis``."""
    p = d.floats(shape, 0.05, 1.0)
    return p / p.sum(axis, keepdims=True)


def _hard_labels(d, shape, classes, ignore_index):
    """int64 class indices; about a quarter of them replaced by ``ignore_index``."""
    return np.where(d.ints(shape, 0, 3) == 0, ignore_index, d.ints(shape, 0, classes - 1))


def _cross_entropy_case(d):
    shape = d.shape(1, 3)
    soft, ignore_index = d.boolean(), d.choice((-100, -1, 0))
    if soft:
        label = _probabilities(d, shape)
    else:
        squeeze = len(shape) > 1 and d.integer(0, 3) == 0
        label_shape = shape[:-1] if squeeze else shape[:-1] + (1,)
        label = _hard_labels(d, label_shape, shape[-1], ignore_index)
    return ({"X": d.floats(shape, 0.1, 1.0), "Label": label},
            {"soft_label": soft, "ignore_index": ignore_index})


def _softmax_with_cross_entropy_case(d):
    shape = d.shape(1, 4)
    axis = -1 if d.boolean() else d.integer(-len(shape), len(shape) - 1)
    index = axis % len(shape)
    soft, use_softmax, ignore_index = d.boolean(), d.integer(0, 3) > 0, d.choice((-100, -1, 0))
    if soft:
        label = _probabilities(d, shape, axis)
    else:
        label_shape = shape[:index] + (1,) + shape[index + 1:]
        label = _hard_labels(d, label_shape, shape[index], ignore_index)
    logits = d.floats(shape, -3.0, 3.0) if use_softmax else _probabilities(d, shape, axis)
    return ({"Logits": logits, "Label": label},
            {"soft_label": soft, "use_softmax": use_softmax, "ignore_index": ignore_index,
             "axis": axis, "numeric_stable_mode": index != len(shape) - 1 or d.boolean()})


_SOFT_LABEL = Attr("soft_label", BOOLEAN, False,
                   "Label holds a probability per class (same shape as the input) instead of "
                   "class indices")
_IGNORE_INDEX = Attr("ignore_index", INT, -100,
                     "a hard label value whose rows give 0 loss and 0 gradient")

register_op(
    "cross_entropy",
    inputs=[Slot("X", "probabilities, the classes along the last axis"),
            Slot("Label", "int64 class indices of shape X.shape[:-1] + (1,) (or X.shape[:-1]); "
                          "with soft_label, probabilities shaped like X")],
    outputs=[Slot("Y", "the loss, shape X.shape[:-1] + (1,)")],
    attrs=[_SOFT_LABEL, _IGNORE_INDEX],
    infer_shape=_cross_entropy_shape,
    grad=GradOp(reads=["X", "Label"], no_grad=["Label"]),
    case=_cross_entropy_case,
    doc="Y = -log(X[..., Label]) (0 where Label == ignore_index); with soft_label, "
        "Y = -sum(Label * log(X), -1)")

register_op(
    "softmax_with_cross_entropy",
    inputs=[Slot("Logits", "unnormalised scores, the classes along axis"),
            Slot("Label", "int64 class indices, Logits' shape with 1 at axis; with soft_label, "
                          "probabilities shaped like Logits")],
    outputs=[Slot("Softmax", "softmax(Logits) along axis (Logits itself if not use_softmax)"),
             Slot("Loss", "the loss, Logits' shape with 1 at axis")],
    attrs=[_SOFT_LABEL,
           Attr("use_softmax", BOOLEAN, True, "False: Logits are already probabilities"),
           Attr("numeric_stable_mode", BOOLEAN, True,
                "kept for Paddle; the CPU kernel is always numerically stable"),
           _IGNORE_INDEX,
           Attr("axis", INT, -1, "the class axis; negative counts from the end")],
    infer_shape=_softmax_with_cross_entropy_shape,
    grad=GradOp(reads=["Label", "Softmax"], out_grads=["Loss"], optional_out_grads=["Softmax"],
                no_grad=["Label"]),
    case=_softmax_with_cross_entropy_case,
    doc="Softmax = softmax(Logits, axis); Loss = -log(Softmax[Label]) along axis (0 where "
        "Label == ignore_index), or -sum(Label * log(Softmax), axis) with soft_label. "
        "The gradient is (Softmax - onehot(Label)) * dLoss, plus Softmax's own when it is used.")
