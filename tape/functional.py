"""``tape.functional`` (``from tape import functional as F``): PyTorch's and Paddle's functional
vocabulary, each function a registered op or a composition of registered ops, so gradients,
``tape.static.trace`` and export come free.

Names, argument names and defaults are Paddle 2.x's (``axis``, ``keepdim``, ``epsilon``,
``label``; a linear weight is (in, out), as ``layers.Linear`` holds it); a docstring says where
PyTorch differs. Losses reduce to 0-D scalars (``reduction="mean"``, also ``"sum"`` and
``"none"``). An argument that is not a Variable (a numpy array, a list, a number) becomes a
constant.

>>> loss = F.cross_entropy(model(x), labels)     # labels: (N,) or (N, 1) ints
>>> loss.backward()
"""
from __future__ import annotations

import numpy as np

from . import dtypes, ops
from .errors import InvalidArgumentError
from .tape import get_global_tape
from .variable import Variable

__all__ = [
    "avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "concat", "conv2d", "cross_entropy", "dropout", "embedding", "gelu", "kl_div", "l1_loss",
    "layer_norm", "linear", "log_softmax", "logsumexp", "max_pool2d", "mse_loss", "nll_loss",
    "one_hot", "pad", "pick", "pick_neg_log_softmax", "relu", "sigmoid", "smooth_l1_loss",
    "softmax", "split", "stack", "tanh",
]


def _variable(x, dtype=None, like: Variable | None = None) -> Variable:
    """``x`` as a Variable: as is, or a constant of ``dtype`` (or ``like``'s dtype) on ``like``'s
    place."""
    if isinstance(x, Variable):
        return x
    dtype = like.dtype if dtype is None and like is not None else dtype
    return Variable(np.asarray(x, dtype=dtype), place=None if like is None else like.place)


def _check_reduction(fn: str, reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise InvalidArgumentError(f"{fn}: reduction must be 'mean', 'sum' or 'none', received "
                                   f"{reduction!r}")


def _reduce(fn: str, loss: Variable, reduction: str) -> Variable:
    _check_reduction(fn, reduction)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


# ---- activations and linear ----

relu, tanh, sigmoid = ops.relu, ops.tanh, ops.sigmoid


def gelu(x: Variable, approximate: bool = False) -> Variable:
    """``x * Phi(x)``, Phi the standard normal CDF (its tanh form when ``approximate``; PyTorch:
    ``approximate="tanh"``)."""
    return ops.gelu(x, approximate=approximate)


def softmax(x: Variable, axis: int = -1) -> Variable:
    """``exp(x) / sum(exp(x))`` along ``axis`` (PyTorch: ``dim``)."""
    return ops.softmax(x, axis=axis)


def log_softmax(x: Variable, axis: int = -1) -> Variable:
    """``x - logsumexp(x)`` along ``axis`` (PyTorch: ``dim``)."""
    return ops.log_softmax(x, axis=axis)


def logsumexp(x: Variable, axis=None, keepdim: bool = False) -> Variable:
    """``log(sum(exp(x)))`` over ``axis`` (an int, a list, or None: all), computed as
    ``m + log(sum(exp(x - m)))`` with ``m`` the maximum, so large values do not overflow."""
    m = x.max(axis, keepdim=True)
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.squeeze(axis)


def linear(x: Variable, weight, bias=None) -> Variable:
    """``x @ weight + bias``, ``weight`` (in, out) as Paddle holds it (PyTorch's is (out, in):
    pass ``w.T``)."""
    y = ops.matmul_v2(x, _variable(weight, like=x))
    return y if bias is None else y + _variable(bias, like=x)


# ---- tensors ----

def concat(xs, axis: int = 0) -> Variable:
    """The Variables ``xs`` joined along an existing ``axis`` (PyTorch: ``torch.cat``)."""
    return ops.concat(list(xs), axis=axis)


def stack(xs, axis: int = 0) -> Variable:
    """The same-shaped Variables ``xs`` joined along a new ``axis``."""
    return ops.stack(list(xs), axis=axis)


def split(x: Variable, num_or_sections, axis: int = 0) -> list:
    """``x`` cut along ``axis``: into ``num_or_sections`` equal parts (an int, Paddle's rule;
    PyTorch's int is a part's size), or parts of the listed sizes (one may be -1)."""
    if isinstance(num_or_sections, int):
        return ops.split(x, axis=axis, num=num_or_sections)
    return ops.split(x, axis=axis, sections=list(num_or_sections))


def one_hot(x, num_classes: int, dtype="float32", allow_out_of_range: bool = False) -> Variable:
    """``x.shape + (num_classes,)``: 1 at each class id of ``x``, else 0 (Paddle's float32;
    PyTorch's is int64); an id outside ``[0, num_classes)`` is an error, or a row of zeros when
    ``allow_out_of_range``."""
    return ops.one_hot_v2(_variable(x, np.int64), depth=num_classes,
                          dtype=dtypes.from_numpy(np.dtype(dtype)),
                          allow_out_of_range=allow_out_of_range)


def embedding(x, weight: Variable, padding_idx: int | None = None) -> Variable:
    """The rows of ``weight`` (V, D) at the ids ``x``: ``x.shape + (D,)``; rows of
    ``padding_idx`` (negative: from the end) are zeros and get no gradient, as in Paddle."""
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += weight.shape[0]
    return ops.lookup_table_v2(_variable(x, np.int64), weight, padding_idx=padding_idx)


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_source(mode: str, n: int, low: int, high: int) -> np.ndarray:
    """For each position of a padded axis of size ``n``, the index of ``x`` it copies."""
    p = np.arange(-low, n + high)
    if mode == "reflect":
        r = np.mod(p, 2 * n - 2) if n > 1 else np.zeros_like(p)
        return np.where(r < n, r, 2 * n - 2 - r)
    if mode == "circular":
        return np.mod(p, n)
    return np.clip(p, 0, n - 1)


def pad(x: Variable, pad, mode: str = "constant", value: float = 0.0) -> Variable:
    """``x`` padded: ``pad = (left, right)`` for the last axis, then ``(top, bottom)`` for the one
    before, and so on (PyTorch's order); ``mode`` is ``"constant"`` (``value``), ``"reflect"``,
    ``"replicate"`` or ``"circular"``.

    >>> F.pad(x, (1, 1, 2, 0))    # last axis: 1 each side; the one before: 2 at the start
    """
    pad = list(pad)
    if mode not in _PAD_MODES or len(pad) % 2 or len(pad) > 2 * x.ndim or min(pad, default=0) < 0:
        raise InvalidArgumentError(
            f"pad: expected mode in {list(_PAD_MODES)} and up to {x.ndim} pairs of widths >= 0, "
            f"received mode={mode!r}, pad={pad}")
    for i in range(len(pad) // 2):
        axis, (low, high) = x.ndim - 1 - i, pad[2 * i:2 * i + 2]
        n = x.shape[axis]
        if low == high == 0:
            continue
        if n < 1 or mode == "reflect" and max(low, high) >= n:
            raise InvalidArgumentError(f"pad: axis {axis} of shape {list(x.shape)} cannot be "
                                       f"padded by ({low}, {high}) in mode {mode!r}")
        source = _pad_source(mode, n, low, high)
        x = ops.gather(x, Variable(source, place=x.place), axis=axis)
        if mode == "constant":
            inside = np.zeros([1] * axis + [len(source)] + [1] * (x.ndim - axis - 1), x.dtype)
            inside.reshape(-1)[low:low + n] = 1
            x = x * inside
            if value:
                x = x + (1 - inside) * value
    return x


# ---- losses ----

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


def _hard_labels(fn: str, label, batch: list, classes: int, ignore_index: int) -> Variable:
    """Class ids of shape ``batch`` (or with a trailing 1), as one (M,) int64 Variable; given as
    numpy values, each must be a class or ``ignore_index``."""
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
    label = _variable(label, np.int64)
    shape = list(label.shape)
    if shape not in (batch, batch + [1]) and -1 not in shape + batch:
        raise InvalidArgumentError(f"{fn}: label must have shape {batch} or {batch + [1]} to "
                                   f"match the input, received {shape}")
    return label.reshape(-1) if label.ndim != 1 else label


def _nll(fn: str, logp: Variable, label: Variable, weight, ignore_index: int,
         reduction: str, smoothing: float = 0.0) -> Variable:
    """The weighted negative log-likelihood of (M, C) log-probabilities at (M,) class ids,
    mixed with ``smoothing`` of the mean over classes; ignored ids add 0 and weigh 0."""
    classes = logp.shape[-1]
    picked = one_hot(label, classes, logp.dtype, allow_out_of_range=True)  # ignored ids: zeros
    if weight is not None:
        weight = _variable(weight, like=logp)
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
        target, _ = _classes_last(fn, _variable(label, like=input), axis)
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / logits.shape[-1]
        if weight is not None:
            target = target * _variable(weight, like=input)
        loss = -(target * log_softmax(logits)).sum(-1)
        loss = _reduce(fn, loss, reduction)
    elif weight is None and not label_smoothing:    # Paddle's fused op
        ids = _hard_labels(fn, label, batch, logits.shape[-1], ignore_index)
        _, loss = ops.softmax_with_cross_entropy(logits, ids.unsqueeze(1),
                                                 ignore_index=ignore_index)
        loss = loss.reshape(-1)
        if reduction == "mean" and (isinstance(label, Variable)
                                    or np.any(np.asarray(label) == ignore_index)):
            loss = loss.sum() / (ids != ignore_index).astype(loss.dtype).sum()
        else:
            loss = _reduce(fn, loss, reduction)
    else:
        label = _hard_labels(fn, label, batch, logits.shape[-1], ignore_index)
        loss = _nll(fn, log_softmax(logits), label, weight, ignore_index, reduction,
                    label_smoothing)
    return loss.reshape(batch) if reduction == "none" else loss


def _pair_loss(fn: str, input: Variable, label) -> tuple:  # noqa: A002
    label = _variable(label, like=input)
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
        loss = loss * _variable(weight, like=input)
    return _reduce("binary_cross_entropy", loss, reduction)


def binary_cross_entropy_with_logits(logit: Variable, label, weight=None,
                                     reduction: str = "mean", pos_weight=None) -> Variable:
    """``binary_cross_entropy(sigmoid(logit), label)`` computed stably as
    ``(1 - label) * logit + (1 + (pos_weight - 1) * label) * softplus(-logit)``; ``pos_weight``
    (per class, broadcast over the last axis) weighs the positive term."""
    label = _pair_loss("binary_cross_entropy_with_logits", logit, label)
    softplus = ops.softplus(-logit)
    if pos_weight is not None:
        softplus = softplus * ((_variable(pos_weight, like=logit) - 1.0) * label + 1.0)
    loss = (1 - label) * logit + softplus
    if weight is not None:
        loss = loss * _variable(weight, like=logit)
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


def pick(x: Variable, index, axis: int = -1) -> Variable:
    """DyNet's pick: the element of ``x`` at ``index`` along ``axis``. An int picks one slice;
    a list, array or int Variable of x's shape without ``axis`` picks one element per position
    (``pick(scores (N, C), labels (N,))`` -> (N,))."""
    axis = axis + x.ndim if axis < 0 else axis
    if isinstance(index, (int, np.integer)):
        return x[(slice(None),) * axis + (int(index),)]
    if axis != x.ndim - 1:
        x = x.transpose([i for i in range(x.ndim) if i != axis] + [axis])
    return (x * one_hot(index, x.shape[-1], x.dtype)).sum(-1)


def pick_neg_log_softmax(x: Variable, index, axis: int = -1) -> Variable:
    """DyNet's pickneglogsoftmax: ``-pick(log_softmax(x, axis), index, axis)``, the
    cross-entropy of each example without reduction."""
    return -pick(log_softmax(x, axis), index, axis)


# ---- layers' ops: dropout, convolution, pooling, normalisation ----

def dropout(x: Variable, p: float = 0.5, training: bool = True) -> Variable:
    """Each element zeroed with probability ``p`` and the rest scaled by ``1 / (1 - p)`` while
    ``training``; ``x`` itself otherwise."""
    if not training or p == 0:
        return x
    return ops.dropout(x, dropout_prob=p, dropout_implementation="upscale_in_train")


def _pair(fn: str, name: str, value) -> list:
    values = [value, value] if isinstance(value, int) else list(value)
    if len(values) != 2 or not all(isinstance(v, int) for v in values):
        raise InvalidArgumentError(f"{fn}: {name} must be an int or two ints, received {value!r}")
    return values


def _padding(fn: str, padding) -> dict:
    """``paddings`` and ``padding_algorithm`` for an int, (h, w), (top, bottom, left, right),
    or ``"same"`` / ``"valid"``."""
    if isinstance(padding, str) and padding.upper() in ("SAME", "VALID"):
        return {"paddings": [0, 0], "padding_algorithm": padding.upper()}
    values = [padding] * 2 if isinstance(padding, int) else list(padding) \
        if isinstance(padding, (list, tuple)) else []
    if len(values) not in (2, 4) or not all(isinstance(v, int) for v in values):
        raise InvalidArgumentError(f"{fn}: padding must be an int, 2 or 4 ints, 'same' or "
                                   f"'valid', received {padding!r}")
    return {"paddings": values, "padding_algorithm": "EXPLICIT"}


def conv2d(x: Variable, weight, bias=None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Variable:
    """2-D convolution of NCHW ``x`` by ``weight`` (M, C / groups, kh, kw), plus ``bias``
    (M,); ``stride``, ``dilation``: an int or (h, w); ``padding``: an int, (h, w), (top,
    bottom, left, right), or ``"same"`` / ``"valid"``."""
    y = ops.conv2d(x, _variable(weight, like=x), strides=_pair("conv2d", "stride", stride),
                   dilations=_pair("conv2d", "dilation", dilation), groups=groups,
                   **_padding("conv2d", padding))
    return y if bias is None else ops.elementwise_add(y, _variable(bias, like=x), axis=1)


def _pool2d(fn: str, pooling_type: str, x: Variable, kernel_size, stride, padding,
            ceil_mode: bool, exclusive: bool = True) -> Variable:
    ksize = _pair(fn, "kernel_size", kernel_size)
    return ops.pool2d(x, ksize=ksize, pooling_type=pooling_type, ceil_mode=ceil_mode,
                      strides=ksize if stride is None else _pair(fn, "stride", stride),
                      exclusive=exclusive, **_padding(fn, padding))


def max_pool2d(x: Variable, kernel_size, stride=None, padding=0,
               ceil_mode: bool = False) -> Variable:
    """The maximum of each (kh, kw) window of NCHW ``x``; ``stride`` defaults to the kernel
    size."""
    return _pool2d("max_pool2d", "max", x, kernel_size, stride, padding, ceil_mode)


def avg_pool2d(x: Variable, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               exclusive: bool = True) -> Variable:
    """The mean of each (kh, kw) window of NCHW ``x``, over the cells on the image when
    ``exclusive`` (Paddle's default; PyTorch's ``count_include_pad=True`` is
    ``exclusive=False``)."""
    return _pool2d("avg_pool2d", "avg", x, kernel_size, stride, padding, ceil_mode, exclusive)


def layer_norm(x: Variable, normalized_shape, weight=None, bias=None,
               epsilon: float = 1e-5) -> Variable:
    """Each sample normalised over its trailing ``normalized_shape`` axes (an int: the last),
    then scaled by ``weight`` and shifted by ``bias`` (of ``normalized_shape``)."""
    count = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    scale, shift = (None if v is None else _variable(v, like=x).reshape(-1)
                    for v in (weight, bias))
    return ops.layer_norm(x, scale, shift, epsilon=epsilon, begin_norm_axis=x.ndim - count)


def batch_norm(x: Variable, running_mean: Variable, running_var: Variable, weight=None,
               bias=None, training: bool = False, momentum: float = 0.9,
               epsilon: float = 1e-5, data_format: str = "NCHW") -> Variable:
    """Per channel: ``(x - m) / sqrt(v + epsilon) * weight + bias``. While ``training``, ``m``
    and ``v`` are the batch's statistics and the running ones move towards them in place
    (``running = momentum * running + (1 - momentum) * batch``: Paddle's momentum, PyTorch's
    ``1 - momentum``); otherwise they are the running statistics."""
    inputs = {"X": [x], "Mean": [running_mean], "Variance": [running_var]}
    for slot, v in (("Scale", weight), ("Bias", bias)):
        if v is not None:
            inputs[slot] = [_variable(v, like=x)]
    outs = get_global_tape().add_op(
        "batch_norm", inputs, {"MeanOut": [running_mean], "VarianceOut": [running_var]},
        {"is_test": not training, "momentum": momentum, "epsilon": epsilon,
         "data_layout": data_format})
    return outs["Y"][0]
