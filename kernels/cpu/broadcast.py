"""Reducing a broadcast gradient back to its input's shape."""
import numpy as np

from tape.ops.rules import align_shapes


def aligned(X, Y, axis):
    """Views of X and Y whose ranks match under Paddle's ``axis`` rule."""
    if X.ndim == Y.ndim or axis == -1:
        return X, Y
    xs, ys = align_shapes(X.shape, Y.shape, axis)
    return X.reshape(xs), Y.reshape(ys)


def unbroadcast(g, shape, padded):
    """Sum ``g`` over the dims where ``padded`` (``shape`` aligned to ``g``'s rank) is 1."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(padded)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(padded)
                                      if n == 1 and g.shape[i + lead] != 1)
    return np.sum(g, axis=axes).reshape(shape) if axes else g.reshape(shape)


def grad_shapes(X, Y, axis):
    """X's and Y's shapes as aligned to the output's rank."""
    if X.ndim == Y.ndim:
        return X.shape, Y.shape
    if axis == -1:
        rank = max(X.ndim, Y.ndim)
        return (1,) * (rank - X.ndim) + X.shape, (1,) * (rank - Y.ndim) + Y.shape
    return align_shapes(X.shape, Y.shape, axis)
