"""concat, split, slice, stack, squeeze2, unsqueeze2, flatten_contiguous_range and their
gradients: numpy copies and views (nothing here is worth a loop)."""
import math

import numpy as np

from tape import dtypes
from tape.geometry import unsqueezed
from tape.registry import kernel

from .tensor import reshape2_grad, xshape_array


def _contiguous(a):
    return a if a.flags.c_contiguous else a.copy()


def _pieces(a, sizes, axis):
    """``a`` cut along ``axis`` into C-contiguous pieces of ``sizes``."""
    # basic slicing: np.split costs 10 us for 4 pieces of a (1, 128) row, this 2 us
    lead = (slice(None),) * (axis % a.ndim)
    pieces, start = [], 0
    for size in sizes:
        pieces.append(_contiguous(a[lead + (slice(start, start + size),)]))
        start += size
    return pieces


@kernel("concat", types=dtypes.ALL)
def concat(X, axis):
    return np.concatenate(X, axis)


@kernel("concat_grad")
def concat_grad(X, dOut, axis):
    return _pieces(dOut, [x.shape[axis] for x in X], axis)


@kernel("split", types=dtypes.ALL)
def split(X, axis, num, sections):
    dim = X.shape[axis]
    if num:
        sizes = [dim // num] * num
    else:
        known = sum(s for s in sections if s != -1)
        sizes = [dim - known if s == -1 else s for s in sections]
    return _pieces(X, sizes, axis)


def _index(ndim, axes, starts, ends):
    # Python slicing clamps negative and out-of-range bounds exactly as Paddle's slice does.
    index = [slice(None)] * ndim
    for axis, start, end in zip(axes, starts, ends):
        index[axis] = slice(start, end)
    return tuple(index)


@kernel("slice", types=dtypes.ALL)
def slice_kernel(Input, axes, starts, ends, decrease_axis):
    out = Input[_index(Input.ndim, axes, starts, ends)]
    if decrease_axis:
        dropped = {a % Input.ndim for a in decrease_axis}
        out = out.reshape([n for i, n in enumerate(out.shape) if i not in dropped])
    return _contiguous(out)


@kernel("slice_grad")
def slice_grad(Input, dOut, axes, starts, ends):
    dx = np.zeros(Input.shape, dOut.dtype)
    index = _index(Input.ndim, axes, starts, ends)
    dx[index] = dOut.reshape(dx[index].shape)
    return dx


@kernel("stack", types=dtypes.ALL)
def stack(X, axis):
    return np.stack(X, axis)


@kernel("stack_grad")
def stack_grad(dY, axis):
    return [a.copy() for a in np.moveaxis(dY, axis, 0)]


@kernel("squeeze2", types=dtypes.ALL)
def squeeze2(X, axes):
    if not axes:
        dropped = {i for i, n in enumerate(X.shape) if n == 1}
    else:
        dropped = {a % X.ndim for a in axes if X.shape[a] == 1} if X.ndim else set()
    return X.reshape([n for i, n in enumerate(X.shape) if i not in dropped]), xshape_array(X)


@kernel("unsqueeze2", types=dtypes.ALL)
def unsqueeze2(X, axes):
    return X.reshape(unsqueezed(X.shape, axes)), xshape_array(X)


@kernel("flatten_contiguous_range", types=dtypes.ALL)
def flatten_contiguous_range(X, start_axis, stop_axis):
    if X.ndim == 0:
        return X.reshape(1), xshape_array(X)
    start, stop = start_axis % X.ndim, stop_axis % X.ndim
    shape = X.shape[:start] + (math.prod(X.shape[start:stop + 1]),) + X.shape[stop + 1:]
    return X.reshape(shape), xshape_array(X)


for _type in ("squeeze2_grad", "unsqueeze2_grad", "flatten_contiguous_range_grad"):
    kernel(_type)(reshape2_grad)
