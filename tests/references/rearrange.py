"""References for expand_v2, tile, index_select, argsort and cumsum: loops and Python's sort
where numpy's own function would be what the kernel calls."""
import numpy as np


def expand_v2(X, shape):
    new = len(shape) - X.ndim
    target = [X.shape[i - new] if n == -1 else n for i, n in enumerate(shape)]
    out = np.empty(target, X.dtype)
    for index in np.ndindex(*target):
        out[index] = X[tuple(0 if n == 1 else i for i, n in zip(index[new:], X.shape))]
    return out


def tile(X, repeat_times):
    rank = max(X.ndim, len(repeat_times))
    x = X.reshape((1,) * (rank - X.ndim) + X.shape)
    times = (1,) * (rank - len(repeat_times)) + tuple(repeat_times)
    out = np.empty([n * t for n, t in zip(x.shape, times)], X.dtype)
    for index in np.ndindex(*out.shape):
        out[index] = x[tuple(i % n for i, n in zip(index, x.shape))]
    return out


def index_select(X, Index, dim):
    dim %= X.ndim
    picked = [X[(slice(None),) * dim + (int(i),)] for i in Index.reshape(-1)]
    shape = X.shape[:dim] + (len(picked),) + X.shape[dim + 1:]
    return np.stack(picked, axis=dim) if picked else np.empty(shape, X.dtype)


def argsort(X, axis, descending, stable):
    if X.ndim == 0:
        return X.copy(), np.zeros((), np.int64)
    rows = np.moveaxis(X, axis, -1)
    index = np.zeros(rows.shape, np.int64)
    for at in np.ndindex(rows.shape[:-1]):
        row = rows[at].tolist()    # Python's sort is stable, reversed too: ties keep index order
        index[at] = sorted(range(len(row)), key=row.__getitem__, reverse=descending)
    index = np.moveaxis(index, -1, axis)
    return np.take_along_axis(X, index, axis), index


def cumsum(X, axis, flatten, exclusive, reverse):
    x = X.reshape(-1) if flatten else X
    if x.ndim == 0:
        return np.zeros_like(x) if exclusive else x.copy()
    axis = 0 if flatten else axis % x.ndim
    rows = np.moveaxis(x, axis, -1)
    out = np.zeros_like(rows)
    n = rows.shape[-1]
    for i in range(n):
        span = range(i + 1, n) if reverse else range(i)
        if not exclusive:
            span = range(i, n) if reverse else range(i + 1)
        for j in span:
            out[..., i] += rows[..., j]
    return np.moveaxis(out, -1, axis)
