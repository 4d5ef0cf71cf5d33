"""expand_v2, tile, index_select, argsort, cumsum and their gradients: numpy copies, sorts and
sums; index_select's scatter-add and argsort's order are those of gather and top_k_v2
(kernels/cpu/indexing.py)."""
import numpy as np

from tape import dtypes
from tape.registry import kernel

from .indexing import _checked_index, _sort_order, gather_grad, top_k_v2_grad


def _expanded_shape(x_shape, shape):
    """The attribute ``shape`` with each -1 replaced by X's size there."""
    new = len(shape) - len(x_shape)
    return tuple(x_shape[i - new] if n == -1 else n for i, n in enumerate(shape))


@kernel("expand_v2", types=dtypes.ALL)
def expand_v2(X, shape):
    return np.broadcast_to(X, _expanded_shape(X.shape, shape)).copy()


def _sum_to(g, shape):
    """``g`` summed over its leading dims and over the dims where ``shape`` (aligned to its
    end) is 1, as ``shape``."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape)
                                      if n == 1 and g.shape[i + lead] != 1)
    return np.asarray(g.sum(axis=axes) if axes else g).reshape(shape)


@kernel("expand_v2_grad")
def expand_v2_grad(X, dOut):
    return _sum_to(dOut, X.shape)


def _aligned(X, repeat_times):
    """X's shape and repeat_times, both padded with leading 1s to one length."""
    rank = max(X.ndim, len(repeat_times))
    return ((1,) * (rank - X.ndim) + X.shape,
            (1,) * (rank - len(repeat_times)) + tuple(repeat_times))


@kernel("tile", types=dtypes.ALL)
def tile(X, repeat_times):
    shape, times = _aligned(X, repeat_times)
    return np.tile(X.reshape(shape), times)


@kernel("tile_grad")
def tile_grad(X, dOut, repeat_times):
    shape, times = _aligned(X, repeat_times)
    # dOut as (t0, n0, t1, n1, ...): copy k of X along dim i is the slice k of t_i
    split = [d for pair in zip(times, shape) for d in pair]
    summed = dOut.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
    return np.asarray(summed, dOut.dtype).reshape(X.shape)


@kernel("index_select", types=dtypes.ALL)
def index_select(X, Index, dim):
    dim %= X.ndim
    return np.asarray(np.take(X, _checked_index("index_select", Index, X.shape[dim], dim), dim))


@kernel("index_select_grad")
def index_select_grad(X, Index, dOut, dim):
    dim %= X.ndim
    _checked_index("index_select_grad", Index, X.shape[dim], dim)   # an error names this op
    return gather_grad(X, Index, dOut, dim)   # the same scatter-add


@kernel("argsort", types=dtypes.INDEXED)
def argsort(X, axis, descending):
    if X.ndim == 0:
        return X.copy(), np.zeros((), np.int64)
    rows = np.moveaxis(X, axis, -1)
    order = _sort_order(rows, descending)
    return (np.ascontiguousarray(np.moveaxis(np.take_along_axis(rows, order, -1), -1, axis)),
            np.ascontiguousarray(np.moveaxis(order, -1, axis), dtype=np.int64))


kernel("argsort_grad")(top_k_v2_grad)


def _cumsum(x, axis, exclusive, reverse):
    """The running sums of ``x`` along ``axis`` in ``x``'s dtype (numpy's widen small ints)."""
    if x.ndim == 0:
        return np.zeros_like(x) if exclusive else x.copy()
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:   # each sum one place on: the sum of what comes before
        shifted = np.zeros_like(out)
        lead = (slice(None),) * axis
        shifted[lead + (slice(1, None),)] = out[lead + (slice(None, -1),)]
        out = shifted
    return np.ascontiguousarray(np.flip(out, axis) if reverse else out)


@kernel("cumsum", types=dtypes.INDEXED)
def cumsum(X, axis, flatten, exclusive, reverse):
    if flatten:
        return _cumsum(X.reshape(-1), 0, exclusive, reverse)
    return _cumsum(X, axis % max(X.ndim, 1), exclusive, reverse)


@kernel("cumsum_grad")
def cumsum_grad(X, dOut, axis, flatten, exclusive, reverse):
    # Out[i] sums X[j] for j before (reverse: after) i, so dX[j] sums dOut[i] for i after
    # (before) j: the same cumsum the other way round
    if flatten:
        return _cumsum(dOut.reshape(-1), 0, exclusive, not reverse).reshape(X.shape)
    return _cumsum(dOut, axis % max(X.ndim, 1), exclusive, not reverse)

