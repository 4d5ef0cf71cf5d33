"""The functional forms of the layers' ops, part of ``tape.functional``: dropout, convolution
(and its transpose), pooling, normalisation (batch, layer, group, instance) and resizing."""
from __future__ import annotations

import numpy as np

from . import ops
from .errors import InvalidArgumentError
from .tape import get_global_tape
from .variable import Variable, as_variable

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
