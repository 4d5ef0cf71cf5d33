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
from .tape import get_global_tape
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
    y = ops.conv2d(x, as_variable(weight, like=x), strides=_pair("conv2d", "stride", stride),
                   dilations=_pair("conv2d", "dilation", dilation), groups=groups,
                   **_padding("conv2d", padding))
    return y if bias is None else ops.elementwise_add(y, as_variable(bias, like=x), axis=1)


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
    scale, shift = (None if v is None else as_variable(v, like=x).reshape(-1)
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
            inputs[slot] = [as_variable(v, like=x)]
    outs = get_global_tape().add_op(
        "batch_norm", inputs, {"MeanOut": [running_mean], "VarianceOut": [running_var]},
        {"is_test": not training, "momentum": momentum, "epsilon": epsilon,
         "data_layout": data_format})
    return outs["Y"][0]


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


# ---- transposed convolution, group and instance normalisation, resizing ----

def conv2d_transpose(x: Variable, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1, output_size=None) -> Variable:
    """The transposed 2-D convolution (the adjoint of ``conv2d``) of NCHW ``x`` by ``weight``
    (C, M / groups, kh, kw), plus ``bias`` (M,): H_out = (H - 1) * stride - pad_top - pad_bottom
    + dilation * (kh - 1) + 1 + output_padding, or ``output_size`` (h, w) when given. Records
    ``depthwise_conv2d_transpose`` when groups = C = M (C > 1), as Paddle does.

    >>> F.conv2d_transpose(x, w, stride=2).shape    # x (N, 4, 8, 8), w (4, 6, 3, 3)
    (N, 6, 17, 17)
    """
    fn = "conv2d_transpose"
    w = as_variable(weight, like=x)
    attrs = {"strides": _pair(fn, "stride", stride), "dilations": _pair(fn, "dilation", dilation),
             "groups": groups, **_padding(fn, padding)}
    if output_size is not None:
        attrs["output_size"] = _pair(fn, "output_size", output_size)
    elif output_padding:
        attrs["output_padding"] = _pair(fn, "output_padding", output_padding)
    channels, out_channels = x.shape[1], w.shape[1] * groups
    depthwise = groups == channels == out_channels and channels != 1
    y = (ops.depthwise_conv2d_transpose if depthwise else ops.conv2d_transpose)(x, w, **attrs)
    return y if bias is None else ops.elementwise_add(y, as_variable(bias, like=x), axis=1)


def group_norm(x: Variable, num_groups: int, epsilon: float = 1e-5, weight=None, bias=None,
               data_format: str = "NCHW") -> Variable:
    """Each sample's channels in ``num_groups`` groups, each group normalised over its channels
    and positions: ``(x - mean) / sqrt(var + epsilon) * weight[c] + bias[c]``; channels at axis
    1 (``"NCHW"``) or last (``"NHWC"``)."""
    scale, shift = (None if v is None else as_variable(v, like=x) for v in (weight, bias))
    return ops.group_norm(x, scale, shift, groups=num_groups, epsilon=epsilon,
                          data_layout=data_format)


_CHANNELS_FIRST = ("NC", "NCL", "NCHW", "NCDHW")


def instance_norm(x: Variable, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.9, eps: float = 1e-5,
                  data_format: str = "NCHW") -> Variable:
    """Each (sample, channel) of channels-first ``x`` normalised over its positions:
    ``(x - mean) / sqrt(var + eps) * weight[c] + bias[c]``. Paddle's running statistics
    (``running_mean``, ``running_var``, ``use_input_stats=False``) are not supported."""
    if running_mean is not None or running_var is not None or not use_input_stats or \
            data_format not in _CHANNELS_FIRST:
        raise InvalidArgumentError(
            f"instance_norm: expected the input's own statistics (no running_mean or "
            f"running_var, use_input_stats=True) and a channels-first data_format in "
            f"{list(_CHANNELS_FIRST)}, received running_mean={running_mean is not None}, "
            f"running_var={running_var is not None}, use_input_stats={use_input_stats}, "
            f"data_format={data_format!r}")
    scale, shift = (None if v is None else as_variable(v, like=x) for v in (weight, bias))
    return ops.instance_norm(x, scale, shift, epsilon=eps)


_INTERP_MODES = {"nearest": "nearest_interp_v2", "bilinear": "bilinear_interp_v2"}


def _tensor_values(v: Variable):
    """A size or scale Variable's values, read now in eager mode (the op then takes them as
    attributes, and its output shape is known); None while tracing, where the program reads
    them when it runs."""
    return None if get_global_tape().tracing else v.numpy().reshape(-1).tolist()


def _interp_size(size, x: Variable) -> dict:
    """The inputs or attributes of an interp op for ``size``: (h, w) ints (attributes), a list
    holding Variables (SizeTensor), or an int Variable of 2 values (OutSize)."""
    if isinstance(size, Variable):
        values = _tensor_values(size)
        if values is None:
            return {"OutSize": size}
        size = values
    size = list(size) if isinstance(size, (list, tuple)) else []
    if len(size) != 2:
        raise InvalidArgumentError(f"interpolate: size must be (height, width) or a Variable "
                                   f"of 2 ints, received {size!r}")
    if get_global_tape().tracing and any(isinstance(s, Variable) for s in size):
        return {"SizeTensor": [s if isinstance(s, Variable) else
                               Variable(np.array([s], np.int32), place=x.place) for s in size]}
    size = [_tensor_values(s)[0] if isinstance(s, Variable) else s for s in size]
    return {"out_h": int(size[0]), "out_w": int(size[1])}


def interpolate(x: Variable, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool = False, align_mode: int = 0,
                data_format: str = "NCHW") -> Variable:
    """4-D ``x`` resized to ``size`` (h, w), or its sides times ``scale_factor`` (a number, (h,
    w), or a float Variable), by ``mode`` ``"nearest"`` or ``"bilinear"``, as Paddle's
    F.interpolate (``nearest_interp_v2`` / ``bilinear_interp_v2``).

    >>> F.interpolate(x, scale_factor=2, mode="bilinear").shape    # x (N, C, 8, 8)
    (N, C, 16, 16)
    """
    if mode not in _INTERP_MODES or (size is None) == (scale_factor is None) or \
            align_corners and mode == "nearest":
        raise InvalidArgumentError(
            f"interpolate: expected mode in {list(_INTERP_MODES)}, exactly one of size and "
            f"scale_factor, and align_corners only with bilinear; received mode={mode!r}, "
            f"size={size!r}, scale_factor={scale_factor!r}, align_corners={align_corners}")
    attrs = {"interp_method": mode, "align_corners": align_corners, "align_mode": align_mode,
             "data_layout": data_format, "out_h": -1, "out_w": -1}
    inputs = {}
    if size is not None:
        for key, value in _interp_size(size, x).items():
            (inputs if key[0].isupper() else attrs)[key] = value
    elif isinstance(scale_factor, Variable) and _tensor_values(scale_factor) is None:
        inputs["Scale"] = scale_factor
    else:
        if isinstance(scale_factor, Variable):
            scale_factor = _tensor_values(scale_factor)
        scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else \
            [scale_factor]
        attrs["scale"] = [float(s) for s in scales * (2 if len(scales) == 1 else 1)]
    return getattr(ops, _INTERP_MODES[mode])(x, **inputs, **attrs)
