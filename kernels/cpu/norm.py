"""batch_norm and layer_norm, forward and gradient, as fused numba loops; group_norm and
instance_norm as whole-array numpy (below).

Statistics are accumulated in float64 whatever the input dtype; batch_norm sees its input as
(outer, C, inner) — NCHW: (N, C, H*W), NHWC: (N*H*W, C, 1) — and reduces every channel in one
pass in memory order.
"""
import numpy as np

from tape.norm_stats import uses_global_stats
from tape.registry import kernel

from .. import formulas
from ..jit import njit


def _channels_view(a, data_layout):
    """``a`` as a contiguous (outer, C, inner) array."""
    a = np.ascontiguousarray(a)
    if data_layout == "NHWC":
        return a.reshape(-1, a.shape[-1], 1)
    return a.reshape(a.shape[0], a.shape[1], -1)


def _vector_or(vector, length, fill):
    """A float64 copy of an optional per-channel (or per-column) vector, ``fill`` if absent."""
    if vector is None:
        return np.full(length, fill)
    return vector.astype(np.float64)


@njit
def _batch_statistics(x, momentum, running_mean, running_var, mean, variance):
    """Per channel of x (outer, C, inner): the mean and biased variance, and the running
    statistics moved towards them in place. Sums are shifted by each channel's first value, so
    that one pass stays accurate when the mean is large against the spread."""
    outer, channels, inner = x.shape
    shift = np.empty(channels)
    total = np.zeros(channels)
    squares = np.zeros(channels)
    for c in range(channels):
        shift[c] = x[0, c, 0]
    for o in range(outer):
        for c in range(channels):
            sd, sdd, _, _ = formulas.channel_slice_sums(x, x, o, c, shift[c], False)
            total[c] += sd
            squares[c] += sdd
    for c in range(channels):
        mean[c], variance[c], running_mean[c], running_var[c] = formulas.batch_statistics(
            total[c], squares[c], shift[c], outer * inner, momentum, running_mean[c],
            running_var[c])


@njit
def _scale_channels(x, mul, add, out):
    """out[:, c, :] = x[:, c, :] * mul[c] + add[c]."""
    outer, channels, inner = x.shape
    for o in range(outer):
        for c in range(channels):
            a = mul[c]
            b = add[c]
            for i in range(inner):
                out[o, c, i] = formulas.scale_shift(x[o, c, i], a, b)


@kernel("batch_norm")
def batch_norm(X, Scale, Bias, Mean, Variance, MomentumTensor, is_test, momentum, epsilon,
               data_layout, use_global_stats, trainable_statistics):
    x = _channels_view(X, data_layout)
    channels = x.shape[1]
    if uses_global_stats(is_test, use_global_stats, trainable_statistics):
        mean, variance = Mean.astype(np.float64), Variance.astype(np.float64)
    else:
        if MomentumTensor is not None:
            momentum = float(MomentumTensor.reshape(-1)[0])
        mean, variance = np.empty(channels), np.empty(channels)
        # MeanOut and VarianceOut are Mean and Variance, updated in place (as in Paddle)
        _batch_statistics(x, momentum, Mean, Variance, mean, variance)
    inv_std = 1.0 / np.sqrt(variance + epsilon)
    mul = _vector_or(Scale, channels, 1.0) * inv_std
    add = _vector_or(Bias, channels, 0.0) - mean * mul
    y = np.empty_like(x)
    _scale_channels(x, mul, add, y)
    return (y.reshape(X.shape), Mean, Variance, mean.astype(X.dtype), inv_std.astype(X.dtype),
            None)


@njit
def _channel_sums(x, dy, shift, sums):
    """Per channel c, with d = x - shift[c]: sums[:, c] += (sum d, sum d*d, sum dy, sum dy*d)."""
    outer, channels, inner = x.shape
    for o in range(outer):
        for c in range(channels):
            sd, sdd, sg, sgd = formulas.channel_slice_sums(x, dy, o, c, shift[c], True)
            sums[0, c] += sd
            sums[1, c] += sdd
            sums[2, c] += sg
            sums[3, c] += sgd


@njit
def _batch_norm_dx(x, dy, mean, mul_dy, mul_centred, add, dx):
    """dx = dy * mul_dy[c] + (x - mean[c]) * mul_centred[c] + add[c] per channel c."""
    outer, channels, inner = x.shape
    for o in range(outer):
        for c in range(channels):
            m = mean[c]
            a = mul_dy[c]
            b = mul_centred[c]
            e = add[c]
            for i in range(inner):
                dx[o, c, i] = formulas.batch_norm_dx(x[o, c, i], dy[o, c, i], m, a, b, e)


@kernel("batch_norm_grad")
def batch_norm_grad(X, Scale, SavedMean, SavedVariance, dY, epsilon, data_layout, is_test,
                    use_global_stats, trainable_statistics, wants):
    x, dy = _channels_view(X, data_layout), _channels_view(dY, data_layout)
    channels, count = x.shape[1], x.shape[0] * x.shape[2]
    shift = SavedMean.astype(np.float64)
    sums = np.zeros((4, channels))
    _channel_sums(x, dy, shift, sums)
    global_stats = uses_global_stats(is_test, use_global_stats, trainable_statistics)
    if global_stats:
        mean, inv_std = shift, SavedVariance.astype(np.float64)
    else:
        # The batch statistics again, in float64 from x (SavedMean shifts the sums): the saved
        # ones are rounded to X's dtype, and with few values per channel the gradient is a
        # small remainder that this rounding would swamp.
        offset = sums[0] / count
        mean = shift + offset
        inv_std = 1.0 / np.sqrt(np.maximum(sums[1] / count - offset * offset, 0.0) + epsilon)
    sum_dy, sum_dy_centred = sums[2], sums[3] - (mean - shift) * sums[2]
    dx = None
    if "X@GRAD" in wants:
        mul_dy = _vector_or(Scale, channels, 1.0) * inv_std
        if global_stats:
            mul_centred = add = np.zeros(channels)
        else:   # the batch mean and variance depend on x too
            mul_centred = -mul_dy * inv_std * inv_std * sum_dy_centred / count
            add = -mul_dy * sum_dy / count
        dx = np.empty_like(x)
        _batch_norm_dx(x, dy, mean, mul_dy, mul_centred, add, dx)
        dx = dx.reshape(X.shape)
    dscale = (sum_dy_centred * inv_std).astype(X.dtype) if "Scale@GRAD" in wants else None
    dbias = sum_dy.astype(X.dtype) if "Bias@GRAD" in wants else None
    return dx, dscale, dbias


# ---- layer_norm: rows of X flattened at begin_norm_axis ----

@njit
def _layer_norm_rows(x, scale, bias, epsilon, y, mean, variance):
    """Per row: mean, biased variance (sums shifted by the row's first value) and y."""
    rows, width = x.shape
    for r in range(rows):
        m, v, _ = formulas.row_statistics(x, r)
        inv_std = 1.0 / np.sqrt(v + epsilon)
        for j in range(width):
            y[r, j] = formulas.normalise(x[r, j], m, inv_std, scale[j], bias[j])
        mean[r] = m
        variance[r] = v


def _rows(a, begin_norm_axis):
    a = np.ascontiguousarray(a)
    return a.reshape(int(np.prod(a.shape[:begin_norm_axis])), -1)


@kernel("layer_norm")
def layer_norm(X, Scale, Bias, epsilon, begin_norm_axis):
    x = _rows(X, begin_norm_axis)
    rows, width = x.shape
    y = np.empty_like(x)
    mean, variance = np.empty(rows, X.dtype), np.empty(rows, X.dtype)
    _layer_norm_rows(x, _vector_or(Scale, width, 1.0), _vector_or(Bias, width, 0.0), epsilon,
                     y, mean, variance)
    lead = X.shape[:begin_norm_axis]
    return y.reshape(X.shape), mean.reshape(lead), variance.reshape(lead)


@njit
def _layer_norm_grad_rows(x, dy, scale, epsilon, want_dx, dx, dscale, dbias):
    """Per row, with xhat = (x - mean) * inv_std and g = dy * scale: dscale += dy * xhat,
    dbias += dy, and with want_dx dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)).
    The row's statistics are recomputed in float64 (sums shifted by its first value): the saved
    Mean and Variance are rounded to X's dtype, and for short rows the gradient is a small
    remainder that this rounding would swamp."""
    rows, width = x.shape
    for r in range(rows):
        k = np.float64(x[r, 0])
        sd = 0.0
        sdd = 0.0
        sg = 0.0
        sgd = 0.0
        for j in range(width):
            d = x[r, j] - k
            g = dy[r, j] * scale[j]
            sd += d
            sdd += d * d
            sg += g
            sgd += g * d
        offset = sd / width
        m = k + offset
        inv_std = 1.0 / np.sqrt(max(sdd / width - offset * offset, 0.0) + epsilon)
        mean_g = sg / width
        mean_g_xhat = inv_std * (sgd / width - offset * mean_g)
        for j in range(width):
            xhat = (x[r, j] - m) * inv_std
            dscale[j] += dy[r, j] * xhat
            dbias[j] += dy[r, j]
            if want_dx:
                dx[r, j] = inv_std * (dy[r, j] * scale[j] - mean_g - xhat * mean_g_xhat)


@kernel("layer_norm_grad")
def layer_norm_grad(X, Scale, dY, epsilon, begin_norm_axis, wants):
    x, dy = _rows(X, begin_norm_axis), _rows(dY, begin_norm_axis)
    width = x.shape[1]
    want_dx = "X@GRAD" in wants
    dx = np.empty_like(x) if want_dx else np.empty((0, 0), x.dtype)
    dscale, dbias = np.zeros(width), np.zeros(width)
    _layer_norm_grad_rows(x, dy, _vector_or(Scale, width, 1.0), epsilon, want_dx, dx, dscale,
                          dbias)
    return (dx.reshape(X.shape) if want_dx else None,
            dscale.astype(X.dtype) if "Scale@GRAD" in wants else None,
            dbias.astype(X.dtype) if "Bias@GRAD" in wants else None)


# ---- group_norm and instance_norm: (N, groups, channels per group, positions) ----
# numpy in float64: each is a few whole-array passes that BLAS-free numpy already streams; the
# same code runs on the GPU with cupy.

def _grouped(a, groups, channels_last):
    """``a`` (N, C, ...) or (N, ..., C) as float64 (N, groups, C / groups, positions)."""
    if channels_last:
        a = np.moveaxis(a, -1, 1)
    return a.astype(np.float64).reshape(a.shape[0], groups, a.shape[1] // groups, -1)


def _ungrouped(a, shape, channels_last, dtype):
    """The inverse of ``_grouped``: ``a`` back in ``shape`` and ``dtype``."""
    if channels_last:
        a = np.moveaxis(a.reshape((shape[0], shape[-1]) + tuple(shape[1:-1])), 1, -1)
    return np.ascontiguousarray(a.reshape(shape).astype(dtype))


def _group_statistics(x, epsilon):
    """Per (sample, group) of grouped ``x``: mean, biased variance, 1 / sqrt(var + epsilon)
    (two passes: no cancellation when the mean is large against the spread)."""
    mean = x.mean(axis=(2, 3), keepdims=True)
    variance = np.square(x - mean).mean(axis=(2, 3), keepdims=True)
    return mean, variance, 1.0 / np.sqrt(variance + epsilon)


def _per_channel(vector, groups, channels, fill):
    """An optional (C,) vector as float64 (1, groups, C / groups, 1), ``fill`` if absent."""
    if vector is None:
        return np.full((1, groups, channels // groups, 1), fill)
    return vector.astype(np.float64).reshape(1, groups, -1, 1)


def _normalise_groups(X, Scale, Bias, groups, epsilon, channels_last):
    """``(Y, mean, variance, inv_std)``, the statistics (N, groups) in X's dtype."""
    channels = X.shape[-1] if channels_last else X.shape[1]
    x = _grouped(X, groups, channels_last)
    mean, variance, inv_std = _group_statistics(x, epsilon)
    y = (x - mean) * inv_std * _per_channel(Scale, groups, channels, 1.0) + \
        _per_channel(Bias, groups, channels, 0.0)
    stats = [s.reshape(X.shape[0], groups).astype(X.dtype) for s in (mean, variance, inv_std)]
    return (_ungrouped(y, X.shape, channels_last, X.dtype), *stats)


def _normalise_groups_grad(X, Scale, dY, groups, epsilon, channels_last, wants):
    """``(dX, dScale, dBias)`` as asked in ``wants``: with xhat the normalised x and g = dY *
    Scale, dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)) per group; the statistics are
    recomputed in float64 from X (the saved ones are rounded to X's dtype)."""
    channels = X.shape[-1] if channels_last else X.shape[1]
    x, dy = _grouped(X, groups, channels_last), _grouped(dY, groups, channels_last)
    mean, _, inv_std = _group_statistics(x, epsilon)
    xhat = (x - mean) * inv_std
    dx = dscale = dbias = None
    if "X@GRAD" in wants:
        g = dy * _per_channel(Scale, groups, channels, 1.0)
        dx = inv_std * (g - g.mean(axis=(2, 3), keepdims=True)
                        - xhat * (g * xhat).mean(axis=(2, 3), keepdims=True))
        dx = _ungrouped(dx, X.shape, channels_last, X.dtype)
    if "Scale@GRAD" in wants:
        dscale = (dy * xhat).sum(axis=(0, 3)).reshape(-1).astype(X.dtype)
    if "Bias@GRAD" in wants:
        dbias = dy.sum(axis=(0, 3)).reshape(-1).astype(X.dtype)
    return dx, dscale, dbias


@kernel("group_norm")
def group_norm(X, Scale, Bias, epsilon, groups, data_layout):
    y, mean, variance, _ = _normalise_groups(X, Scale, Bias, groups, epsilon,
                                             data_layout == "NHWC")
    return y, mean, variance


@kernel("group_norm_grad")
def group_norm_grad(X, Scale, dY, epsilon, groups, data_layout, wants):
    return _normalise_groups_grad(X, Scale, dY, groups, epsilon, data_layout == "NHWC", wants)


@kernel("instance_norm")
def instance_norm(X, Scale, Bias, epsilon):
    y, mean, _, inv_std = _normalise_groups(X, Scale, Bias, X.shape[1], epsilon, False)
    return y, mean.reshape(-1), inv_std.reshape(-1)


@kernel("instance_norm_grad")
def instance_norm_grad(X, Scale, dY, epsilon, wants):
    return _normalise_groups_grad(X, Scale, dY, X.shape[1], epsilon, False, wants)
