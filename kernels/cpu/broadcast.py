"""Paddle's ``axis`` alignment for kernels, and reducing a broadcast gradient to its input's shape.

The common reduction (a bias gradient: sum a (rows, features) gradient over its rows) is
numpy's: measured against a numba loop it is faster up to 64x256 (3.4 against 5.1 us) and ties
at 256x1024, and it loads no numba. With a product fused in (``elementwise_mul``'s gradient) a
numba loop saves a temporary and a pass.
"""
import math

import numpy as np

from tape.geometry import align_shapes

from ..jit import njit


def _trailing(X, Y, axis) -> bool:
    """Whether ``axis`` places the shorter of X and Y at the end, as numpy's broadcasting does
    (Linear's bias add: axis 1 for (N, M) + (M,))."""
    return axis == -1 or axis == abs(X.ndim - Y.ndim)


def aligned(X, Y, axis):
    """Views of X and Y whose ranks match under Paddle's ``axis`` rule."""
    if X.ndim == Y.ndim or _trailing(X, Y, axis):
        return X, Y
    xs, ys = align_shapes(X.shape, Y.shape, axis)
    return X.reshape(xs), Y.reshape(ys)


def grad_shapes(X, Y, axis):
    """X's and Y's shapes as aligned to the output's rank."""
    if X.ndim == Y.ndim:
        return X.shape, Y.shape
    if _trailing(X, Y, axis):
        rank = max(X.ndim, Y.ndim)
        return (1,) * (rank - X.ndim) + X.shape, (1,) * (rank - Y.ndim) + Y.shape
    return align_shapes(X.shape, Y.shape, axis)


def grad_operands(X, Y, axis):
    """``(x, y, xs, ys)``: views of X and Y aligned to the output's rank, and their shapes."""
    if X.ndim == Y.ndim:    # the common case, without a reshape
        return X, Y, X.shape, Y.shape
    xs, ys = grad_shapes(X, Y, axis)
    return X.reshape(xs), Y.reshape(ys), xs, ys


def _sum_rows(g, out):
    return np.sum(g, axis=0, out=out)


@njit
def _sum_rows_of_product(a, b, out):
    out[:] = 0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[j] += a[i, j] * b[i, j]
    return out


def _reduced_axes(g_shape, padded):
    lead = len(g_shape) - len(padded)
    return tuple(range(lead)) + tuple(i + lead for i, n in enumerate(padded)
                                      if n == 1 and g_shape[i + lead] != 1)


def _leading_rows(g_shape, axes):
    """How many leading dims ``axes`` reduces when it is exactly a prefix of ``g``'s dims (the
    case one numba loop handles), else 0."""
    k = len(axes)
    return k if k and axes == tuple(range(k)) and k < len(g_shape) else 0


def unbroadcast(g, shape, padded):
    """Sum ``g`` over the dims where ``padded`` (``shape`` aligned to ``g``'s rank) is 1."""
    if g.shape == tuple(shape):
        return g
    if g.size == math.prod(shape):    # only unit dims to drop or add (a bias at batch 1)
        return g.reshape(shape)
    axes = _reduced_axes(g.shape, padded)
    k = _leading_rows(g.shape, axes)
    if k and g.flags.c_contiguous:
        inner = math.prod(g.shape[k:])
        out = np.empty(inner, g.dtype)
        return _sum_rows(g.reshape(-1, inner), out).reshape(shape)
    return np.sum(g, axis=axes).reshape(shape)


def unbroadcast_product(a, b, shape, padded):
    """``unbroadcast(a * b, shape, padded)``, fused when it is a plain sum over leading rows."""
    if a.shape == shape:
        return a * b
    if a.shape == b.shape and a.size != math.prod(shape) and a.dtype == b.dtype:
        axes = _reduced_axes(a.shape, padded)
        k = _leading_rows(a.shape, axes)
        if k and a.flags.c_contiguous and b.flags.c_contiguous:
            inner = math.prod(a.shape[k:])
            out = np.empty(inner, a.dtype)
            return _sum_rows_of_product(a.reshape(-1, inner), b.reshape(-1, inner),
                                        out).reshape(shape)
    return unbroadcast(a * b, shape, padded)
