"""Reference for pad3d: a loop over the output cells of each padded axis, each mapped to its
source cell by the mode's formula."""
import numpy as np


def _source(i, side, low, mode):
    """The X cell that padded cell ``i`` copies, or None for a constant cell."""
    j = i - low
    if 0 <= j < side:
        return j
    if mode == "constant":
        return None
    if mode == "replicate":
        return min(max(j, 0), side - 1)
    if mode == "circular":
        return j % side
    period = 2 * (side - 1)   # reflect: mirror about the edge cells, which are not repeated
    j = abs(j) % period if period else 0
    return j if j < side else period - j


def pad3d(X, paddings, mode, value, data_format, Paddings=None):
    if Paddings is not None:
        paddings = [int(p) for p in Paddings]
    x = np.moveaxis(X, -1, 1) if data_format == "NDHWC" else X
    for axis in range(3):
        side, low, high = x.shape[2 + axis], paddings[4 - 2 * axis], paddings[5 - 2 * axis]
        parts = []
        for i in range(side + low + high):
            j = _source(i, side, low, mode)
            cut = np.take(x, [j if j is not None else 0], axis=2 + axis)
            parts.append(np.full_like(cut, value) if j is None else cut)
        x = np.concatenate(parts, axis=2 + axis)
    return np.moveaxis(x, 1, -1) if data_format == "NDHWC" else x
