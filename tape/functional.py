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
from .layer_functions import (  # noqa: F401  (tape.functional's own)
    avg_pool2d,
    batch_norm,
    conv2d,
    conv2d_transpose,
    dropout,
    group_norm,
    instance_norm,
    interpolate,
    layer_norm,
    max_pool2d,
)
from .losses import (  # noqa: F401  (tape.functional's own)
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .variable import Variable, as_variable

__all__ = [
    "avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "concat", "conv2d", "conv2d_transpose", "cross_entropy", "dropout", "embedding", "gelu",
    "group_norm", "instance_norm", "interpolate", "kl_div", "l1_loss", "layer_norm", "linear",
    "log_softmax", "logsumexp", "max_pool2d", "mse_loss", "nll_loss", "one_hot", "pad", "pick",
    "pick_neg_log_softmax", "relu", "sigmoid", "smooth_l1_loss", "softmax", "split", "stack",
    "tanh",
]


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
    y = ops.matmul_v2(x, as_variable(weight, like=x))
    return y if bias is None else y + as_variable(bias, like=x)


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
    return ops.one_hot_v2(as_variable(x, np.int64), depth=num_classes,
                          dtype=dtypes.from_numpy(np.dtype(dtype)),
                          allow_out_of_range=allow_out_of_range)


def embedding(x, weight: Variable, padding_idx: int | None = None) -> Variable:
    """The rows of ``weight`` (V, D) at the ids ``x``: ``x.shape + (D,)``; rows of
    ``padding_idx`` (negative: from the end) are zeros and get no gradient, as in Paddle."""
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += weight.shape[0]
    return ops.lookup_table_v2(as_variable(x, np.int64), weight, padding_idx=padding_idx)


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


# ---- DyNet's pick ----

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


# ---- ReLU's variants (Paddle's paddle.nn.functional names) ----

__all__ += ["argsort", "cumsum", "elu", "expand", "hardsigmoid", "hardswish", "index_select",
            "mish", "prelu", "relu6", "selu", "silu", "swish", "tile"]

relu6, swish, silu = ops.relu6, ops.swish, ops.silu


def hardswish(x: Variable) -> Variable:
    """``x * min(max(x + 3, 0), 6) / 6``."""
    return ops.hard_swish(x)


def hardsigmoid(x: Variable, slope: float = 0.1666667, offset: float = 0.5) -> Variable:
    """``min(max(slope * x + offset, 0), 1)`` (Paddle's slope; PyTorch's is 1/6 too)."""
    return ops.hard_sigmoid(x, slope=slope, offset=offset)


def mish(x: Variable) -> Variable:
    """``x * tanh(log(1 + exp(x)))``."""
    return ops.mish(x)


def elu(x: Variable, alpha: float = 1.0) -> Variable:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return ops.elu(x, alpha=alpha)


def selu(x: Variable, scale: float = 1.0507009873554804934,
         alpha: float = 1.6732632423543772848) -> Variable:
    """``scale * x`` where ``x > 0``, else ``scale * alpha * (exp(x) - 1)``; Paddle asks
    ``scale > 1`` and ``alpha >= 0``."""
    if not (scale > 1 and alpha >= 0):
        raise InvalidArgumentError(f"selu: expected scale > 1 and alpha >= 0, received "
                                   f"scale={scale}, alpha={alpha}")
    return ops.selu(x, scale=scale, alpha=alpha)


_PRELU_FORMATS = ("NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC")


def prelu(x: Variable, weight, data_format: str = "NCHW") -> Variable:
    """``x`` where ``x > 0``, else ``weight * x``: ``weight`` 1-D, of one slope for every
    element or one per channel (axis 1, or the last for a channels-last ``data_format``)."""
    weight = as_variable(weight, like=x)
    if data_format not in _PRELU_FORMATS or weight.ndim != 1:
        raise InvalidArgumentError(f"prelu: expected a 1-D weight and data_format in "
                                   f"{list(_PRELU_FORMATS)}, received weight of shape "
                                   f"{list(weight.shape)}, data_format={data_format!r}")
    mode = "all" if weight.shape[0] == 1 else "channel"
    return ops.prelu(x, weight, mode=mode, data_format="NCHW" if data_format[1] == "C" else "NHWC")


# ---- repeating, picking, sorting, running sums ----

def expand(x: Variable, shape) -> Variable:
    """``x`` broadcast to ``shape`` (-1 keeps a dim of ``x``; PyTorch: ``x.expand``)."""
    return ops.expand_v2(x, shape=list(shape))


def tile(x: Variable, repeat_times) -> Variable:
    """``x`` repeated ``repeat_times[i]`` times along dim ``i`` (numpy's ``tile``)."""
    return ops.tile(x, repeat_times=list(repeat_times))


def cumsum(x: Variable, axis: int | None = None) -> Variable:
    """Running sums along ``axis``; over ``x`` flattened when ``axis`` is None."""
    if axis is None:
        return ops.cumsum(x, axis=-1, flatten=True)
    return ops.cumsum(x, axis=axis)


def index_select(x: Variable, index, axis: int = 0) -> Variable:
    """The slices of ``x`` at ``index`` (1-D ints, negative from the end) along ``axis``."""
    return ops.index_select(x, as_variable(index, np.int64), dim=axis)


def argsort(x: Variable, axis: int = -1, descending: bool = False,
            stable: bool = False) -> Variable:
    """The int64 positions that sort ``x`` along ``axis`` (equal values in index order)."""
    return ops.argsort(x, axis=axis, descending=descending, stable=stable)[1]
