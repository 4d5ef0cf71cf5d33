"""The losses of ``tape.functional``: compositions of registered ops that reduce to 0-D
scalars (``reduction="mean"``, also ``"sum"`` and ``"none"``), with Paddle's names and defaults.
A label that is not a Variable (a numpy array, a list, a number) becomes a constant."""
from __future__ import annotations

import numpy as np

from . import ops
from .errors import InvalidArgumentError
from .variable import Variable, as_variable


def _check_reduction(fn: str, reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise InvalidArgumentError(f"{fn}: reduction must be 'mean', 'sum' or 'none', received "
                                   f"{reduction!r}")


def _reduce(fn: str, loss: Variable, reduction: str) -> Variable:
    _check_reduction(fn, reduction)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _classes_last(fn: str, x: Variable, axis: int) -> tuple:
    """``x`` as (M, C) with its class ``axis`` last, and the batch shape (x's other axes)."""
    axis = axis + x.ndim if axis < 0 else axis
    if x.ndim == 0 or not 0 <= axis < x.ndim or x.shape[axis] < 0:
        raise InvalidArgumentError(f"{fn}: input of shape {list(x.shape)} has no known class "
                                   f"axis {axis}")
    batch = [n for i, n in enumerate(x.shape) if i != axis]
    if axis != x.ndim - 1:
        x = x.transpose([i for i in range(x.ndim) if i != axis] + [axis])
    return (x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x), batch


def _hard_labels(fn: str, label, batch: list, classes: int, ignore_index: int,
                 column: bool = False) -> Variable:
    """Class ids of shape ``batch`` (or with a trailing 1), as one (M,) int64 Variable, or
    (M, 1) if ``column``; given as numpy values, each must be a class or ``ignore_index``."""
    kind = (label if isinstance(label, Variable) else np.asarray(label)).dtype.kind
    if kind not in "iu":
        raise InvalidArgumentError(f"{fn}: label must hold int class ids, received {kind!r} "
                                   f"values (soft_label=True takes probabilities)")
    if not isinstance(label, Variable):
        ids = np.asarray(label)
        bad = (ids != ignore_index) & ((ids < 0) | (ids >= classes))
        if bad.any():
            raise InvalidArgumentError(f"{fn}: label holds {ids[bad][0]}, neither a class in "
                                       f"[0, {classes}) nor ignore_index ({ignore_index})")
    shape = list(np.shape(label)) if not isinstance(label, Variable) else list(label.shape)
    if shape not in (batch, batch + [1]) and -1 not in shape + batch:
        raise InvalidArgumentError(f"{fn}: label must have shape {batch} or {batch + [1]} to "
                                   f"match the input, received {shape}")
    if not isinstance(label, Variable):     # shaped by numpy: no reshape op
        return as_variable(np.asarray(label).reshape((-1, 1) if column else -1), np.int64)
    if column:
        return label.reshape([-1, 1]) if shape[-1:] != [1] or label.ndim != 2 else label
    return label.reshape(-1) if label.ndim != 1 else label


def _nll(fn: str, logp: Variable, label: Variable, weight, ignore_index: int,
         reduction: str, smoothing: float = 0.0) -> Variable:
    """The weighted negative log-likelihood of (M, C) log-probabilities at (M,) class ids,
    mixed with ``smoothing`` of the mean over classes; ignored ids add 0 and weigh 0."""
    classes = logp.shape[-1]
    picked = ops.one_hot_v2(label, depth=classes, dtype=logp.desc.dtype,  # ignored ids:
                           allow_out_of_range=True)                      # zeros
    if weight is not None:
        weight = as_variable(weight, like=logp)
        picked = picked * weight
    loss = -(picked * logp).sum(-1)
    if smoothing:
        spread = logp * weight if weight is not None else logp
        loss = loss * (1.0 - smoothing) - spread.sum(-1) * (smoothing / classes)
    valid = (label != ignore_index).astype(logp.dtype)
    loss = loss * valid
    if reduction != "mean":
        return _reduce(fn, loss, reduction)
    return loss.sum() / (valid * picked.sum(-1) if weight is not None else valid).sum()


def nll_loss(input: Variable, label, weight=None, ignore_index: int = -100,  # noqa: A002
             reduction: str = "mean") -> Variable:
    """``-input[i, label[i]] * weight[label[i]]`` averaged over the weights of the labels not
    equal to ``ignore_index``. ``input``: log-probabilities (N, C) or (N, C, d...), classes on
    axis 1; ``label``: (N,) or (N, d...) ints (PyTorch's ``target``)."""
    _check_reduction("nll_loss", reduction)
    logp, batch = _classes_last("nll_loss", input, 1 if input.ndim > 1 else 0)
    label = _hard_labels("nll_loss", label, batch, logp.shape[-1], ignore_index)
    loss = _nll("nll_loss", logp, label, weight, ignore_index, reduction)
    return loss.reshape(batch) if reduction == "none" else loss


def cross_entropy(input: Variable, label, weight=None, ignore_index: int = -100,  # noqa: A002
                  reduction: str = "mean", soft_label: bool = False, axis: int = -1,
                  label_smoothing: float = 0.0) -> Variable:
    """Softmax cross-entropy of logits ``input`` against ``label``; returns the loss only.

    ``input``: (N, C), (C,) or (N, ..., C), the classes on ``axis`` (PyTorch puts them on axis
    1: pass ``axis=1``). ``label``: class ids of the batch shape (N,) or with a trailing 1 (N,
    1), as a Variable, numpy array, list, or a Python int for a (C,) input; with
    ``soft_label``, probabilities shaped like ``input``. ``weight`` (C,) weighs each class;
    labels equal to ``ignore_index`` add nothing. ``label_smoothing`` ``e`` mixes ``1 - e`` of
    the label with ``e`` of the uniform distribution. ``"mean"`` divides by the summed weights
    of the counted labels (by N for soft labels); ``"none"`` gives the batch shape.

    >>> F.cross_entropy(logits, np.array([3, 0]))    # logits (2, C) -> 0-D loss
    """
    fn = "cross_entropy"
    _check_reduction(fn, reduction)
    logits, batch = _classes_last(fn, input, axis)
    if soft_label:
        target, _ = _classes_last(fn, as_variable(label, like=input), axis)
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / logits.shape[-1]
        if weight is not None:
            target = target * as_variable(weight, like=input)
        loss = -(target * ops.log_softmax(logits, axis=-1)).sum(-1)
        loss = _reduce(fn, loss, reduction)
    elif weight is None and not label_smoothing:    # Paddle's fused op
        # (M, 1) ids and losses: reduced as they are, with no reshape op to (M,)
        ids = _hard_labels(fn, label, batch, logits.shape[-1], ignore_index, column=True)
        _, loss = ops.softmax_with_cross_entropy(logits, ids, ignore_index=ignore_index)
        if reduction == "mean" and (isinstance(label, Variable)
                                    or np.any(np.asarray(label) == ignore_index)):
            loss = loss.sum() / (ids != ignore_index).astype(loss.dtype).sum()
        else:
            loss = _reduce(fn, loss, reduction)
    else:
        label = _hard_labels(fn, label, batch, logits.shape[-1], ignore_index)
        loss = _nll(fn, ops.log_softmax(logits, axis=-1), label, weight, ignore_index, reduction,
                    label_smoothing)
    return loss.reshape(batch) if reduction == "none" else loss


def _pair_loss(fn: str, input: Variable, label) -> tuple:  # noqa: A002
    label = as_variable(label, like=input)
    if label.shape != input.shape and -1 not in label.shape + input.shape:
        raise InvalidArgumentError(f"{fn}: label of shape {list(label.shape)} must match input "
                                   f"of shape {list(input.shape)}")
    return label


def binary_cross_entropy(input: Variable, label, weight=None,  # noqa: A002
                         reduction: str = "mean") -> Variable:
    """``-weight * (label * log(input) + (1 - label) * log(1 - input))``, ``input`` the
    probabilities, each log clamped at -100 as in PyTorch and Paddle."""
    label = _pair_loss("binary_cross_entropy", input, label)
    loss = -(label * input.log().clip(min=-100.0) + (1 - label) * (1 - input).log().clip(
        min=-100.0))
    if weight is not None:
        loss = loss * as_variable(weight, like=input)
    return _reduce("binary_cross_entropy", loss, reduction)


def binary_cross_entropy_with_logits(logit: Variable, label, weight=None,
                                     reduction: str = "mean", pos_weight=None) -> Variable:
    """``binary_cross_entropy(sigmoid(logit), label)`` computed stably as
    ``(1 - label) * logit + (1 + (pos_weight - 1) * label) * softplus(-logit)``; ``pos_weight``
    (per class, broadcast over the last axis) weighs the positive term."""
    label = _pair_loss("binary_cross_entropy_with_logits", logit, label)
    softplus = ops.softplus(-logit)
    if pos_weight is not None:
        softplus = softplus * ((as_variable(pos_weight, like=logit) - 1.0) * label + 1.0)
    loss = (1 - label) * logit + softplus
    if weight is not None:
        loss = loss * as_variable(weight, like=logit)
    return _reduce("binary_cross_entropy_with_logits", loss, reduction)


def mse_loss(input: Variable, label, reduction: str = "mean") -> Variable:  # noqa: A002
    """``(input - label) ** 2``."""
    return _reduce("mse_loss", ops.square(input - _pair_loss("mse_loss", input, label)),
                   reduction)


def l1_loss(input: Variable, label, reduction: str = "mean") -> Variable:  # noqa: A002
    """``|input - label|``."""
    return _reduce("l1_loss", abs(input - _pair_loss("l1_loss", input, label)), reduction)


def smooth_l1_loss(input: Variable, label, reduction: str = "mean",  # noqa: A002
                   delta: float = 1.0) -> Variable:
    """Huber's loss of ``d = input - label``: ``d**2 / 2`` where ``|d| < delta``, else
    ``delta * (|d| - delta / 2)`` (Paddle's; PyTorch's ``beta`` form is this divided by
    ``beta``, equal at the common default 1)."""
    distance = abs(input - _pair_loss("smooth_l1_loss", input, label))
    near = distance.clip(max=delta)
    return _reduce("smooth_l1_loss", near * near * 0.5 + (distance - near) * delta, reduction)


def kl_div(input: Variable, label, reduction: str = "mean",  # noqa: A002
           log_target: bool = False) -> Variable:
    """``label * (log(label) - input)``, ``input`` log-probabilities, ``label`` probabilities
    (log-probabilities when ``log_target``), 0 where ``label`` is 0. ``"batchmean"`` divides the
    sum by the batch size (the mathematically right KL divergence)."""
    label = _pair_loss("kl_div", input, label)
    if log_target:
        loss = label.exp() * (label - input)
    else:
        tiny = float(np.finfo(input.dtype).tiny)    # 0 * log(tiny) = 0: xlogy's limit at 0
        loss = label * (label.clip(min=tiny).log() - input)
    if reduction == "batchmean":
        return loss.sum() / float(input.shape[0]) if input.ndim else loss.sum()
    return _reduce("kl_div", loss, reduction)
