"""mean, reduce_sum, reduce_mean, reduce_max, reduce_min and squared_l2_norm: numpy reductions,
gradients broadcast back."""
import math

import numpy as np

from tape.registry import kernel


@kernel("mean")
def mean(X):
    # X.mean()'s arithmetic (the sum divided in float64, rounded to X's dtype) without its
    # Python wrapper: 1.6 against 4.3 us at (1, 32). A 0-D array, not a numpy scalar.
    return np.asarray(np.add.reduce(X, axis=None) / np.float64(X.size), X.dtype)


@kernel("mean_grad")
def mean_grad(X, dOut):
    # np.full's arithmetic without its Python wrapper: 1.3 against 2.0 us at (64, 1)
    dx = np.empty(X.shape, X.dtype)
    dx.fill(dOut / max(X.size, 1))
    return dx


def _axes(dim, reduce_all, ndim):
    """The reduced axes as numpy takes them (None: all), as the shape rule validated them."""
    if reduce_all or not dim or ndim == 0:
        return None
    return tuple(axis % ndim for axis in dim)


@kernel("reduce_sum")
def reduce_sum(X, dim, keep_dim, reduce_all):
    # np.sum's reduction without its Python wrapper (1.1 against 2.7 us at (1, 32))
    return np.asarray(np.add.reduce(X, axis=_axes(dim, reduce_all, X.ndim), keepdims=keep_dim))


@kernel("reduce_mean")
def reduce_mean(X, dim, keep_dim, reduce_all):
    return np.asarray(np.mean(X, axis=_axes(dim, reduce_all, X.ndim), keepdims=keep_dim))


@kernel("reduce_max")
def reduce_max(X, dim, keep_dim, reduce_all):
    return np.asarray(np.max(X, axis=_axes(dim, reduce_all, X.ndim), keepdims=keep_dim))


@kernel("reduce_min")
def reduce_min(X, dim, keep_dim, reduce_all):
    return np.asarray(np.min(X, axis=_axes(dim, reduce_all, X.ndim), keepdims=keep_dim))


def _kept(shape, axes) -> tuple:
    """``shape`` with the reduced ``axes`` (None: all) as 1s: the reduced shape, keep_dim-style."""
    return tuple(1 if axes is None or i in axes else n for i, n in enumerate(shape))


def _spread(dOut, shape, axes, factor=None):
    """dOut, of the reduced shape, broadcast back to ``shape`` (times ``factor``) in a new array."""
    kept = _kept(shape, axes)
    g = dOut.reshape(kept) if factor is None else dOut.reshape(kept) * factor
    out = np.empty(shape, dOut.dtype)
    out[...] = g
    return out


@kernel("reduce_sum_grad")
def reduce_sum_grad(X, dOut, dim, reduce_all):
    return _spread(dOut, X.shape, _axes(dim, reduce_all, X.ndim))


@kernel("reduce_mean_grad")
def reduce_mean_grad(X, dOut, dim, reduce_all):
    axes = _axes(dim, reduce_all, X.ndim)
    count = X.size if axes is None else math.prod(X.shape[i] for i in axes)
    return _spread(dOut, X.shape, axes, 1.0 / max(count, 1))


@kernel("reduce_max_grad")
@kernel("reduce_min_grad")
def reduce_extreme_grad(X, Out, dOut, dim, reduce_all):
    """dOut goes to the elements of X equal to their Out, shared equally among ties (Paddle's
    reduce_max_grad / reduce_min_grad)."""
    axes = _axes(dim, reduce_all, X.ndim)
    kept = _kept(X.shape, axes)
    hit = X == Out.reshape(kept)
    share = dOut.reshape(kept) / np.sum(hit, axis=axes, keepdims=True, dtype=dOut.dtype)
    return np.asarray(hit * share)


@kernel("squared_l2_norm")
def squared_l2_norm(X):
    x = X.reshape(-1)
    return np.dot(x, x).reshape(1)     # BLAS: one pass, no X * X temporary


@kernel("squared_l2_norm_grad")
def squared_l2_norm_grad(X, dOut):
    return np.asarray(2 * dOut.reshape(()) * X)
