"""pad3d and its gradient: a gather along each spatial axis, and its transpose.

Each padded axis reads X at precomputed source cells (numpy's own padding of ``arange(side)``
in the matching mode gives them); the gradient is the transposed selection, a GEMM with a
(padded, side) 0/1 matrix per axis, which adds up the cells that read one source. Both are
whole-array numpy calls, which cupy runs on the GPU unchanged.
"""
import functools

import numpy as np

from tape.errors import InvalidArgumentError
from tape.registry import kernel

_NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@functools.lru_cache(maxsize=256)
def _sources(side, low, high, mode):
    """Host arrays of one padded axis: the X cell each padded cell copies (0 for a constant
    cell), whether it copies one, and the (padded, side) 0/1 matrix of the copies."""
    if mode == "constant":
        cells = np.pad(np.arange(side), (low, high), constant_values=-1)
    else:
        cells = np.pad(np.arange(side), (low, high), mode=_NUMPY_MODES[mode])
    arrays = (np.maximum(cells, 0), cells >= 0, cells[:, None] == np.arange(side)[None, :])
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _geometry(X, Paddings, paddings, mode, data_format):
    """``(first spatial axis, [(side, low, high)] for depth, height and width)``; pads from the
    Paddings tensor are checked here, as the shape rule checks the attribute's."""
    if Paddings is not None:
        paddings = [int(p) for p in Paddings.reshape(-1).tolist()]
    first = 1 if data_format == "NDHWC" else 2
    axes = []
    for axis in range(3):
        side, low, high = X.shape[first + axis], paddings[4 - 2 * axis], paddings[5 - 2 * axis]
        if min(low, high) < 0 or mode == "reflect" and max(low, high) >= side:
            raise InvalidArgumentError(
                f"pad3d: Paddings {paddings} pad axis {'DHW'[axis]} of size {side} by ({low}, "
                f"{high}) in mode {mode!r}: expected pads >= 0"
                + (f" and < {side}" if mode == "reflect" else ""))
        axes.append((side, low, high))
    return first, axes


@kernel("pad3d")
def pad3d(X, Paddings, paddings, mode, value, data_format):
    first, axes = _geometry(X, Paddings, paddings, mode, data_format)
    out = X
    for axis, (side, low, high) in enumerate(axes):
        cells, inside, _ = _sources(side, low, high, mode)
        out = np.take(out, np.asarray(cells), axis=first + axis)
        if mode == "constant" and (low or high):
            inside = np.asarray(inside).reshape((-1,) + (1,) * (out.ndim - first - axis - 1))
            out = np.where(inside, out, np.asarray(value, X.dtype))
    return np.ascontiguousarray(out)


@kernel("pad3d_grad")
def pad3d_grad(X, Paddings, dOut, paddings, mode, data_format):
    first, axes = _geometry(X, Paddings, paddings, mode, data_format)
    grad = dOut
    for axis, (side, low, high) in enumerate(axes):
        selection = np.asarray(_sources(side, low, high, mode)[2], X.dtype)
        moved = np.moveaxis(grad, first + axis, -1)
        grad = np.moveaxis(np.matmul(moved, selection), -1, first + axis)
    return np.ascontiguousarray(grad)
