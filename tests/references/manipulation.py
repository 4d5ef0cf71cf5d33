"""References for concat, split, slice, stack, squeeze2, unsqueeze2, flatten_contiguous_range."""
import numpy as np


def concat(X, axis):
    return np.concatenate([np.asarray(x) for x in X], axis=axis)


def split(X, axis, num, sections):
    n = X.shape[axis]
    if num:
        sizes = [n // num] * num
    else:
        sizes = list(sections)
        if -1 in sizes:
            sizes[sizes.index(-1)] = n - sum(s for s in sizes if s != -1)
    out, start = [], 0
    for size in sizes:
        out.append(np.take(X, np.arange(start, start + size), axis=axis))
        start += size
    return out


def slice(Input, axes, starts, ends, decrease_axis):
    out = Input
    for axis, start, end in zip(axes, starts, ends):
        n = Input.shape[axis]
        start = start + n if start < 0 else start
        end = end + n if end < 0 else end
        start, end = min(max(start, 0), n), min(max(end, 0), n)
        out = np.take(out, np.arange(start, end), axis=axis)
    if decrease_axis:
        out = np.squeeze(out, axis=tuple(decrease_axis))
    return out


def stack(X, axis):
    return np.stack(X, axis=axis)


def squeeze2(X, axes):
    if not axes:
        return np.squeeze(X)
    return np.squeeze(X, axis=tuple(a for a in axes if X.ndim and X.shape[a] == 1))


def unsqueeze2(X, axes):
    out = X
    for axis in axes:
        out = np.expand_dims(out, axis)
    return out


def flatten_contiguous_range(X, start_axis, stop_axis):
    if X.ndim == 0:
        return X.reshape(1)
    start, stop = start_axis % X.ndim, stop_axis % X.ndim
    merged = int(np.prod(X.shape[start:stop + 1]))
    return X.reshape(X.shape[:start] + (merged,) + X.shape[stop + 1:])
