"""mul, matmul_v2, scale and sum: BLAS through numpy's ``@``, and plain ufuncs.

A weight's gradient at batch 1 is an outer product, ``(K, 1) @ (1, N)``, which BLAS's GEMM does
slowly: from about 32x32 a numba loop wins (5.5 against 60 us at 128x320, 2.3 against 2.5 at
32x32; 2.3 against 1.5 at 64x5, where numba's call costs more than the work).
"""
import math

import numpy as np

from tape import dtypes
from tape.registry import FLOAT_TYPES, kernel

from ..jit import njit
from .broadcast import unbroadcast


@njit
def _outer(a, b, zero, out):
    # a * b + 0, as GEMM sums from 0: +0.0 where the product is -0.0, bit for bit BLAS's result
    for i in range(a.size):
        for j in range(b.size):
            out[i, j] = a[i] * b[j] + zero
    return out


@njit
def _add_outer(a, b, zero, out):
    # out + (a * b + 0): what adding ``_outer``'s product to ``out`` gives, bit for bit
    for i in range(a.size):
        for j in range(b.size):
            out[i, j] += a[i] * b[j] + zero
    return out


# Outer products of at least this many elements run in the numba loop.
OUTER_NUMBA_FROM = 1024


def _numba_outer(a, b) -> bool:
    """Whether ``a @ b`` is an outer product (2-D, inner size 1) large enough for the numba
    loop, on host arrays."""
    # cheapest test first: this runs for every product of every matmul gradient
    return (a.shape[-1] == 1 and a.ndim == 2 == b.ndim
            and a.shape[0] * b.shape[1] >= OUTER_NUMBA_FROM and a.dtype == b.dtype
            and type(a) is np.ndarray and type(b) is np.ndarray)


def _matmul(a, b):
    """``a @ b``, with a large enough outer product in one numba loop."""
    if _numba_outer(a, b):
        out = np.empty((a.shape[0], b.shape[1]), a.dtype)
        return _outer(a.reshape(-1), b.reshape(-1), a.dtype.type(0), out)
    return a @ b


def _matmul_added(target, a, b):
    """``target += a @ b`` in place, returning None, where ``_matmul`` runs the numba outer
    product and ``target`` (or None) is a C-contiguous host array of its shape and dtype: one
    pass, no temporary (a Tree-LSTM's weight gradient gets one outer product per node). Else
    ``_matmul(a, b)``, for the caller to add."""
    if (target is not None and _numba_outer(a, b) and type(target) is np.ndarray
            and target.shape == (a.shape[0], b.shape[1]) and target.dtype == a.dtype
            and target.flags.c_contiguous and target.flags.writeable):
        _add_outer(a.reshape(-1), b.reshape(-1), a.dtype.type(0), target)
        return None
    return _matmul(a, b)


def _flatten(a, num_col_dims):
    if a.ndim == 2 and num_col_dims == 1:    # already a matrix (Linear's case): no reshape
        return a
    return a.reshape(math.prod(a.shape[:num_col_dims]), math.prod(a.shape[num_col_dims:]))


def _matrices(X, Y, x_num_col_dims, y_num_col_dims) -> bool:
    """Whether X and Y are already the matrices mul multiplies (Linear's case): no reshapes."""
    return X.ndim == 2 and Y.ndim == 2 and x_num_col_dims == 1 and y_num_col_dims == 1


@kernel("mul")
def mul(X, Y, x_num_col_dims, y_num_col_dims):
    if _matrices(X, Y, x_num_col_dims, y_num_col_dims):
        return X @ Y
    out = _flatten(X, x_num_col_dims) @ _flatten(Y, y_num_col_dims)
    return out.reshape(X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:])


@kernel("mul_grad")
def mul_grad(X, Y, dOut, x_num_col_dims, y_num_col_dims, wants):
    if _matrices(X, Y, x_num_col_dims, y_num_col_dims):
        return (_matmul(dOut, Y.T) if "X@GRAD" in wants else None,
                _matmul(X.T, dOut) if "Y@GRAD" in wants else None)
    x, y = _flatten(X, x_num_col_dims), _flatten(Y, y_num_col_dims)
    dout = dOut.reshape(x.shape[0], y.shape[1])
    dx = _matmul(dout, y.T).reshape(X.shape) if "X@GRAD" in wants else None
    dy = _matmul(x.T, dout).reshape(Y.shape) if "Y@GRAD" in wants else None
    return dx, dy


_ONLY_DX = {True: ("X@GRAD",), False: ()}


def mul_grad_into(targets, X, Y, dOut, x_num_col_dims, y_num_col_dims, wants):
    """``mul_grad`` with Y@GRAD added into ``targets[1]`` in place (then returned as None)
    where it is a large outer product (batch 1; ``_matmul_added``)."""
    if targets[1] is None or "Y@GRAD" not in wants or \
            not _matrices(X, Y, x_num_col_dims, y_num_col_dims):
        return mul_grad(X, Y, dOut, x_num_col_dims, y_num_col_dims, wants)
    dx, _ = mul_grad(X, Y, dOut, 1, 1, _ONLY_DX["X@GRAD" in wants])
    return dx, _matmul_added(targets[1], X.T, dOut)


mul_grad.add_into = mul_grad_into


def _swap(a):
    return a.swapaxes(-1, -2)


@kernel("matmul_v2")
def matmul_v2(X, Y, trans_x, trans_y):
    x = _swap(X) if trans_x and X.ndim > 1 else X
    y = _swap(Y) if trans_y and Y.ndim > 1 else Y
    return np.asarray(x @ y)   # 1-D @ 1-D gives a numpy scalar


@kernel("matmul_v2_grad")
def matmul_v2_grad(X, Y, dOut, trans_x, trans_y, wants):
    # As matrices: a 1-D X is a row, a 1-D Y a column, and dOut gets their unit dims back.
    x = X if X.ndim > 1 else X[None, :]
    y = Y if Y.ndim > 1 else Y[:, None]
    g = dOut if Y.ndim > 1 else dOut[..., None]
    g = g if X.ndim > 1 else g[..., None, :]
    trans_x, trans_y = trans_x and X.ndim > 1, trans_y and Y.ndim > 1
    dx = dy = None
    if "X@GRAD" in wants:
        if trans_x:
            dx = _matmul(_swap(y) if trans_y else y, _swap(g))
        else:
            dx = _matmul(g, y if trans_y else _swap(y))
        dx = unbroadcast(dx, X.shape, x.shape)
    if "Y@GRAD" in wants:
        if trans_y:
            dy = _matmul(_swap(g), _swap(x) if trans_x else x)
        else:
            dy = _matmul(x if trans_x else _swap(x), g)
        dy = unbroadcast(dy, Y.shape, y.shape)
    return dx, dy


def matmul_v2_grad_into(targets, X, Y, dOut, trans_x, trans_y, wants):
    """``matmul_v2_grad`` with Y@GRAD added into ``targets[1]`` in place (then returned as
    None) where it is a large outer product of matrices (batch 1, as LSTMCell's
    ``x @ w.T``; ``_matmul_added``)."""
    if targets[1] is None or "Y@GRAD" not in wants or X.ndim != 2 or Y.ndim != 2 or trans_x:
        return matmul_v2_grad(X, Y, dOut, trans_x, trans_y, wants)
    dx, _ = matmul_v2_grad(X, Y, dOut, trans_x, trans_y, _ONLY_DX["X@GRAD" in wants])
    # the operands matmul_v2_grad multiplies for dY (its unbroadcast changes nothing here)
    return dx, _matmul_added(targets[1], *((_swap(dOut), X) if trans_y else (_swap(X), dOut)))


matmul_v2_grad.add_into = matmul_v2_grad_into


@kernel("scale", types=(*FLOAT_TYPES, dtypes.INT32, dtypes.INT64))
def scale(X, scale, bias, bias_after_scale):
    # Paddle's ``scale * X + bias`` (or ``scale * (X + bias)``), the attributes in X's type
    # first; a step is left out only where it cannot change a bit: x * 1.0 and x + (-0.0) are
    # x, but x + 0.0 is not (-0.0 + 0.0 is +0.0). ``x * c`` records a -0.0 bias: one pass.
    if X.dtype.kind == "i":     # Paddle casts the attributes to X's type (toward zero)
        scale, bias = int(scale), int(bias)
        if bias == 0:
            return X * scale
    elif bias == 0.0 and math.copysign(1.0, bias) < 0.0:
        return X * scale
    if not bias_after_scale:
        out = X + bias
        out *= scale
        return out
    if scale == 1.0:
        return X + bias
    out = X * scale
    out += bias
    return out


def _scale_with_attrs(attrs: dict, dtype: int):
    """``scale`` for one plan's attributes, on floats, as ``positional`` calls it: the two
    commonest cases (``x * c``: a -0.0 bias; ``x + c``: scale 1) as one ufunc with nothing
    left to decide per call; None (the general kernel) for the rest."""
    if dtype not in dtypes.FLOATING or not attrs["bias_after_scale"]:
        return None
    # as X's scalar type: numpy takes a Python float the slow way, and gives the same bits (a
    # Python float operand is cast to X's dtype first)
    as_x = dtypes.to_numpy(dtype).type
    factor, bias = as_x(attrs["scale"]), as_x(attrs["bias"])
    if bias == 0.0 and math.copysign(1.0, bias) < 0.0:
        return lambda attrs, wants, X, ScaleTensor=None, BiasTensor=None: X * factor
    if factor == 1.0:
        return lambda attrs, wants, X, ScaleTensor=None, BiasTensor=None: X + bias
    return None


scale.with_attrs = _scale_with_attrs


@kernel("sum")
def sum_inputs(X):
    if len(X) == 1:
        return X[0].copy()
    out = X[0] + X[1]
    for x in X[2:]:
        out += x
    return out
