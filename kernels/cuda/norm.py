"""batch_norm, layer_norm, group_norm and instance_norm, forward and gradient, on the GPU.

The kernels are the CPU ones with the device array module and with numba.cuda launches, of the
same signatures, in place of their numba loops: the statistics and the gradient's per-channel
algebra are written once, and so are the slice sums and per-element formulas
(kernels/formulas.py). Sums are float64 as on the CPU. Per-channel sums add per (outer,
channel) slice with float64 atomics; layer_norm runs a thread per row, and its Scale/Bias
gradients a thread per column. ``float()`` on a loaded value makes the CUDA simulator sum in
float64 too (numpy keeps ``0.0 + float32`` in float32; compiled numba promotes).
"""
import math

import numpy as np
from numba import cuda

from .. import formulas
from ..cpu import norm as cpu
from .device import (
    array_module,
    cuda_kernel,
    device_function,
    launch,
    on_device,
    on_device_using,
)

_slice_sums_of = device_function(formulas.channel_slice_sums)
_statistics_of = device_function(formulas.batch_statistics)
_scale_shift = device_function(formulas.scale_shift)
_batch_norm_dx_of = device_function(formulas.batch_norm_dx)


@cuda.jit
def _slice_sums(x, dy, shift, with_dy, sums):
    """Per (outer, channel) slice, with d = x - shift[c], adds sum d and sum d*d (and with_dy,
    sum dy and sum dy*d) over the slice into sums[:, c]."""
    outer, channels, inner = x.shape
    for e in range(cuda.grid(1), outer * channels, cuda.gridsize(1)):
        o, c = e // channels, e % channels
        sd, sdd, sg, sgd = _slice_sums_of(x, dy, o, c, shift[c], with_dy)
        cuda.atomic.add(sums, (0, c), sd)
        cuda.atomic.add(sums, (1, c), sdd)
        if with_dy:
            cuda.atomic.add(sums, (2, c), sg)
            cuda.atomic.add(sums, (3, c), sgd)


@cuda.jit
def _finish_statistics(sums, shift, count, momentum, running_mean, running_var, mean,
                       variance):
    for c in range(cuda.grid(1), mean.size, cuda.gridsize(1)):
        mean[c], variance[c], running_mean[c], running_var[c] = _statistics_of(
            sums[0, c], sums[1, c], shift[c], count, momentum, running_mean[c], running_var[c])


def _batch_statistics(x, momentum, running_mean, running_var, mean, variance):
    """The CPU loop's contract: per channel of x (outer, C, inner) the mean and biased variance
    (sums shifted by the channel's first value), and the running statistics updated in place."""
    xp = array_module(x)
    outer, channels, inner = x.shape
    shift = x[0, :, 0].astype(np.float64)
    sums = xp.zeros((4, channels))
    launch(_slice_sums, outer * channels, x, x, shift, False, sums)
    launch(_finish_statistics, channels, sums, shift, outer * inner, momentum, running_mean,
           running_var, mean, variance)


def _channel_sums(x, dy, shift, sums):
    launch(_slice_sums, x.shape[0] * x.shape[1], x, dy, shift, True, sums)


@cuda.jit
def _scale_channels_kernel(x, mul, add, out):
    outer, channels, inner = x.shape
    for e in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        o, c, i = e // (channels * inner), (e // inner) % channels, e % inner
        out[o, c, i] = _scale_shift(x[o, c, i], mul[c], add[c])


@cuda.jit
def _batch_norm_dx_kernel(x, dy, mean, mul_dy, mul_centred, add, dx):
    outer, channels, inner = x.shape
    for e in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        o, c, i = e // (channels * inner), (e // inner) % channels, e % inner
        dx[o, c, i] = _batch_norm_dx_of(x[o, c, i], dy[o, c, i], mean[c], mul_dy[c],
                                        mul_centred[c], add[c])


def _scale_channels(x, mul, add, out):
    launch(_scale_channels_kernel, x.size, x, mul, add, out)


def _batch_norm_dx(x, dy, mean, mul_dy, mul_centred, add, dx):
    launch(_batch_norm_dx_kernel, x.size, x, dy, mean, mul_dy, mul_centred, add, dx)


_channels_view = on_device(cpu._channels_view)
_vector_or = on_device(cpu._vector_or)
cuda_kernel("batch_norm")(on_device(
    cpu.batch_norm, _channels_view=_channels_view, _vector_or=_vector_or,
    _batch_statistics=_batch_statistics, _scale_channels=_scale_channels))
cuda_kernel("batch_norm_grad")(on_device(
    cpu.batch_norm_grad, _channels_view=_channels_view, _vector_or=_vector_or,
    _channel_sums=_channel_sums, _batch_norm_dx=_batch_norm_dx))


# ---- layer_norm ----

_row_statistics = device_function(formulas.row_statistics)
_normalise = device_function(formulas.normalise)


@cuda.jit
def _layer_norm_rows_kernel(x, scale, bias, epsilon, y, mean, variance):
    rows, width = x.shape
    for r in range(cuda.grid(1), rows, cuda.gridsize(1)):
        m, v, _ = _row_statistics(x, r)
        inv_std = 1.0 / math.sqrt(v + epsilon)
        for j in range(width):
            y[r, j] = _normalise(x[r, j], m, inv_std, scale[j], bias[j])
        mean[r] = m
        variance[r] = v


@cuda.jit
def _layer_norm_dx_rows(x, dy, scale, epsilon, want_dx, dx, row_mean, row_inv_std):
    """Per row: its float64 mean and 1 / std, and with want_dx
    dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale."""
    rows, width = x.shape
    for r in range(cuda.grid(1), rows, cuda.gridsize(1)):
        m, v, offset = _row_statistics(x, r)
        inv_std = 1.0 / math.sqrt(v + epsilon)
        row_mean[r] = m
        row_inv_std[r] = inv_std
        if want_dx:
            k = m - offset
            sg = 0.0
            sgd = 0.0
            for j in range(width):
                g = float(dy[r, j]) * scale[j]
                sg += g
                sgd += g * (float(x[r, j]) - k)
            mean_g = sg / width
            mean_g_xhat = inv_std * (sgd / width - offset * mean_g)
            for j in range(width):
                xhat = (float(x[r, j]) - m) * inv_std
                dx[r, j] = inv_std * (float(dy[r, j]) * scale[j] - mean_g - xhat * mean_g_xhat)


@cuda.jit
def _layer_norm_scale_bias_columns(x, dy, row_mean, row_inv_std, dscale, dbias):
    rows, width = x.shape
    for j in range(cuda.grid(1), width, cuda.gridsize(1)):
        s = 0.0
        b = 0.0
        for r in range(rows):
            g = float(dy[r, j])
            s += g * (float(x[r, j]) - row_mean[r]) * row_inv_std[r]
            b += g
        dscale[j] += s
        dbias[j] += b


def _layer_norm_rows(x, scale, bias, epsilon, y, mean, variance):
    launch(_layer_norm_rows_kernel, x.shape[0], x, scale, bias, epsilon, y, mean, variance)


def _layer_norm_grad_rows(x, dy, scale, epsilon, want_dx, dx, dscale, dbias):
    """The CPU loop's contract: dscale += dy * xhat and dbias += dy over the rows, and with
    want_dx the rows of dx."""
    xp = array_module(x, dy)
    row_mean, row_inv_std = xp.empty(x.shape[0]), xp.empty(x.shape[0])
    launch(_layer_norm_dx_rows, x.shape[0], x, dy, scale, epsilon, want_dx, dx, row_mean,
           row_inv_std)
    launch(_layer_norm_scale_bias_columns, x.shape[1], x, dy, row_mean, row_inv_std, dscale,
           dbias)


def _rows(a, begin_norm_axis):
    """``a`` as a C-contiguous (rows, width) array split at ``begin_norm_axis``."""
    return array_module(a).ascontiguousarray(a).reshape(math.prod(a.shape[:begin_norm_axis]), -1)


cuda_kernel("layer_norm")(on_device(cpu.layer_norm, _rows=_rows, _vector_or=_vector_or,
                                    _layer_norm_rows=_layer_norm_rows))
cuda_kernel("layer_norm_grad")(on_device(cpu.layer_norm_grad, _rows=_rows, _vector_or=_vector_or,
                                         _layer_norm_grad_rows=_layer_norm_grad_rows))


# ---- group_norm and instance_norm: the CPU's whole-array numpy code with the device's arrays ----

_group_helpers = {name: on_device(getattr(cpu, name))
                  for name in ("_grouped", "_ungrouped", "_group_statistics", "_per_channel")}
_group_helpers["_normalise_groups"] = on_device_using(cpu._normalise_groups, _group_helpers)
_group_helpers["_normalise_groups_grad"] = on_device_using(cpu._normalise_groups_grad,
                                                          _group_helpers)
for _op in ("group_norm", "group_norm_grad", "instance_norm", "instance_norm_grad"):
    cuda_kernel(_op)(on_device_using(getattr(cpu, _op), _group_helpers))
