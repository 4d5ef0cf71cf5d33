"""gather, one_hot_v2, arg_max, arg_min, top_k_v2 and accuracy: indices checked as they are used,
a numba scatter-add for gather's gradient, and a numba selection for top_k_v2.

The scatter-add is a loop because indices repeat: for X of 10000x64 and 4096 indices it takes
about 0.08 ms where ``np.add.at`` takes 3 ms (float32; sorting and ``np.add.reduceat``, 2.8 ms).
"""
import math

import numpy as np

from tape import dtypes
from tape.errors import InvalidArgumentError
from tape.registry import kernel

from ..jit import njit


def _checked_index(op, Index, size, axis):
    """Index as positions along ``axis`` (0-D, or 1-D for an (n,) or (n, 1) Index), each in
    [-size, size), else an error naming the op, the slot and the first bad value."""
    index = Index.reshape(Index.shape[:1])
    flat = index.reshape(-1)
    bad = np.flatnonzero((flat < -size) | (flat >= size))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(f"{op}: Index holds {int(flat[i])} at position {i}, out of "
                                   f"range for axis {axis} of X, of size {size} (expected "
                                   f"-{size} <= index < {size})")
    return index


@kernel("gather", types=dtypes.INDEXED)
def gather(X, Index, axis):
    axis %= X.ndim
    return np.asarray(np.take(X, _checked_index("gather", Index, X.shape[axis], axis), axis))


@njit
def _scatter_add(index, dout, dx):
    """dx[o, index[j], i] += dout[o, j, i]: a repeated index adds up, a negative one counts from
    the end."""
    outer, count, inner = dout.shape
    size = dx.shape[1]
    for o in range(outer):
        for j in range(count):
            k = index[j] + size if index[j] < 0 else index[j]
            for i in range(inner):
                dx[o, k, i] += dout[o, j, i]


@kernel("gather_grad")
def gather_grad(X, Index, dOut, axis):
    axis %= X.ndim
    size = X.shape[axis]
    index = _checked_index("gather_grad", Index, size, axis).reshape(-1)
    outer, inner = math.prod(X.shape[:axis]), math.prod(X.shape[axis + 1:])
    dx = np.zeros(X.shape, X.dtype)
    _scatter_add(np.ascontiguousarray(index),
                 np.ascontiguousarray(dOut).reshape(outer, index.size, inner),
                 dx.reshape(outer, size, inner))
    return dx


@kernel("one_hot_v2", types=dtypes.INDEX)
def one_hot_v2(X, depth, dtype, allow_out_of_range):
    ids = X.reshape(-1)
    inside = (ids >= 0) & (ids < depth)
    rows = np.flatnonzero(inside)
    if rows.size < ids.size and not allow_out_of_range:
        i = int(np.flatnonzero(~inside)[0])
        raise InvalidArgumentError(f"one_hot_v2: X holds {int(ids[i])} at (flat) position {i}, "
                                   f"out of range for depth {depth} (expected 0 <= X < {depth}, "
                                   f"or allow_out_of_range=True for a row of zeros)")
    out = np.zeros((ids.size, depth), dtypes.to_numpy(dtype))
    out[rows, ids[rows]] = 1
    return out.reshape(X.shape + (depth,))


def _arg_extreme(find, X, axis, keepdims, flatten):
    """``find`` (an argmax or argmin taking axis and keepdims) along ``axis``, or over all of X
    when flatten (or X is 0-D), shaped as the shape rule says."""
    if flatten or X.ndim == 0:
        out = find(X.reshape(-1), axis=0, keepdims=keepdims)
        return out.reshape((1,) * X.ndim) if flatten and keepdims else out
    return find(X, axis=axis % X.ndim, keepdims=keepdims)


def _index_dtype(code):
    return dtypes.to_numpy(dtypes.INT64 if code == -1 else code)


@kernel("arg_max", types=dtypes.INDEXED)
def arg_max(X, axis, keepdims, flatten, dtype):
    return np.asarray(_arg_extreme(np.argmax, X, axis, keepdims, flatten), _index_dtype(dtype))


@kernel("arg_min", types=dtypes.INDEXED)
def arg_min(X, axis, keepdims, flatten, dtype):
    return np.asarray(_arg_extreme(np.argmin, X, axis, keepdims, flatten), _index_dtype(dtype))


def _sort_order(X, largest):
    """The order that sorts X's last axis, largest (smallest) first; equal values in index order,
    NaN above every number (a stable numpy sort)."""
    if not largest:
        return np.argsort(X, -1, kind="stable")
    # a stable ascending sort of X reversed, read backwards: descending, ties in index order
    last = X.shape[-1] - 1
    return last - np.flip(np.argsort(np.flip(X, -1), -1, kind="stable"), -1)


@njit
def _select_top_k(x, largest, index):
    """index[r] = the positions of the k = index.shape[1] best values of x[r], best first, by
    insertion into the running k best: a value that does not beat the k-th costs one
    comparison, and an equal one never beats, so ties keep index order."""
    def beats(a, b):    # a strictly before b: larger (smaller), NaN above every number
        if largest:
            return (a != a and b == b) or a > b
        return (a == a and b != b) or a < b

    k = index.shape[1]
    for r in range(x.shape[0]):
        row, best = x[r], index[r]
        count = 0
        for j in range(x.shape[1]):
            v = row[j]
            if count == k and not beats(v, row[best[k - 1]]):
                continue
            i = count if count < k else k - 1
            while i > 0 and beats(v, row[best[i - 1]]):
                best[i] = best[i - 1]
                i -= 1
            best[i] = j
            count = min(count + 1, k)


# Insertion moves up to k entries per value (ascending rows, for largest): past k = 16 a full
# sort costs less in that worst case (256 rows of 1000: 2.8 ms by insertion, 2.4 ms sorted),
# though on random rows insertion stays ahead to k = 64 (2.5 ms against 12 ms).
_INSERTION_MAX_K = 16


def _top_k_positions(X, k, largest):
    """``_sort_order(X, largest)[..., :k]``, by insertion into the k best for a small k."""
    if k > _INSERTION_MAX_K:
        return _sort_order(X, largest)[..., :k]
    index = np.empty(X.shape[:-1] + (k,), np.int64)
    _select_top_k(np.ascontiguousarray(X).reshape(-1, X.shape[-1]), largest,
                  index.reshape(-1, k))
    return index


@kernel("top_k_v2", types=dtypes.INDEXED)
def top_k_v2(X, k, axis, largest):
    if X.ndim == 0:
        return X.copy(), np.zeros((), np.int64)
    rows = np.moveaxis(X, axis, -1)
    index = _top_k_positions(rows, k, largest)
    out = np.take_along_axis(rows, index, -1)
    return (np.ascontiguousarray(np.moveaxis(out, -1, axis)),
            np.ascontiguousarray(np.moveaxis(index, -1, axis), dtype=np.int64))


def _along_axis(index, axis):
    """The fancy index that addresses, in an array of ``index``'s shape but along ``axis``, the
    positions ``index`` holds (numpy's ``put_along_axis``, which cupy 13 lacks)."""
    grid = [np.arange(n).reshape((1,) * i + (n,) + (1,) * (index.ndim - i - 1))
            for i, n in enumerate(index.shape)]
    grid[axis] = index
    return tuple(grid)


@kernel("top_k_v2_grad")
def top_k_v2_grad(X, Indices, dOut, axis):
    if X.ndim == 0:
        return dOut.copy()
    dx = np.zeros(X.shape, X.dtype)
    dx[_along_axis(Indices, axis % X.ndim)] = dOut
    return dx


@kernel("accuracy")
def accuracy(Indices, Label):
    correct = np.asarray(np.count_nonzero(np.any(Indices == Label, axis=1)), np.int32)
    total = Indices.shape[0]
    ratio = correct.astype(np.float32) / np.float32(max(total, 1))
    return np.asarray(ratio, np.float32), correct, np.asarray(total, np.int32)
