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


def _sum_rows(g):
    """The sums of a C-contiguous 2-D ``g``'s columns: row after row from zero (numpy's order)."""
    return _add_reduce(g, 0)    # the ufunc's method: np.sum's wrapper costs 1.5 us more a call


_add_reduce = np.add.reduce


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


# (g's shape, the target shape, padded) -> how ``unbroadcast`` reduces: None (a reshape only),
# or ``(rows, axes)`` with ``rows`` the 2-D shape of a sum over leading rows (else None) and
# ``axes`` the axes summed. Shapes repeat step after step: deciding once per signature takes
# 3 of a bias gradient's 6 us (64x256).
_reductions: dict = {}


def _reduction(g_shape, shape, padded):
    key = (g_shape, shape, padded)
    try:
        return _reductions[key]
    except KeyError:
        pass
    how = None
    if math.prod(g_shape) != math.prod(shape):     # else only unit dims to drop or add
        axes = _reduced_axes(g_shape, padded)
        k = _leading_rows(g_shape, axes)
        how = ((math.prod(g_shape[:k]), math.prod(g_shape[k:])) if k else None, axes)
    if len(_reductions) >= 4096:
        _reductions.clear()
    _reductions[key] = how
    return how


def unbroadcast(g, shape: tuple, padded: tuple):
    """Sum ``g`` over the dims where ``padded`` (``shape`` aligned to ``g``'s rank) is 1."""
    if g.shape == shape:
        return g
    how = _reduction(g.shape, shape, padded)
    if how is None:         # a bias at batch 1: a reshape, not a sum
        return g.reshape(shape)
    rows, axes = how
    if rows is not None and g.flags.c_contiguous:
        out = _sum_rows(g.reshape(rows))
    else:
        out = np.sum(g, axis=axes)
    return out if out.shape == shape else out.reshape(shape)


def unbroadcast_product(a, b, shape: tuple, padded: tuple):
    """``unbroadcast(a * b, shape, padded)``, fused when it is a plain sum over leading rows."""
    if a.shape == shape:
        return a * b
    if a.shape == b.shape and a.dtype == b.dtype:
        how = _reduction(a.shape, shape, padded)
        rows = how and how[0]
        if rows is not None and a.flags.c_contiguous and b.flags.c_contiguous:
            out = np.empty(rows[1], a.dtype)
            return _sum_rows_of_product(a.reshape(rows), b.reshape(rows), out).reshape(shape)
    return unbroadcast(a * b, shape, padded)
