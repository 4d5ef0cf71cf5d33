"""Activation kernels: numpy ufuncs forward (relu a numba loop on large arrays); numba loops for
gradients and softmax rows.

Measured on 256x1024 float32: the gradients that take several numpy passes (relu, sigmoid, tanh,
square) run as one numba loop in about half the time of the numpy expression; exp_grad and
log_grad are one ufunc, which numba only ties (sqrt_grad, two, is left to numpy too). Softmax
rows mix the two: numba finds the row maxima and sums (numpy's reductions along short rows are
slow), numpy takes the exp (vectorised; numba's is scalar and 3-4x slower). For that reason
softplus_grad stays numpy: 0.42 ms against 1.13 ms for a numba loop on float32 (on float64
the loop would win, 1.1 against 3.8 ms).
"""
import math

import numpy as np

from tape.registry import kernel

from .. import formulas
from ..jit import njit, njit_with, pointwise

# np.maximum minds NaN element by element: 7.0 against 2.8 us for the loop at 64x256 float32,
# 111 against 30 at 256x1024, 2.8 against 2.1 at 64x64, but 1.7 against 1.8 at 32x64 (the
# loop's ahead-of-time call).
RELU_NUMBA_FROM = 4096
_relu = pointwise(formulas.relu, inputs=1)


@kernel("relu")
def relu(X):
    # a cupy array (the CUDA place runs this function too) takes the ufunc, and so does a
    # strided one, whose layout np.maximum's result keeps
    if X.size < RELU_NUMBA_FROM or type(X) is not np.ndarray or not X.flags.c_contiguous:
        return np.maximum(X, 0)
    out = np.empty(X.shape, X.dtype)
    _relu(X.reshape(-1), out.reshape(-1), ())     # formulas.relu: np.maximum(X, 0) bit for bit
    return out


# exp(-x) overflows to inf for x below about -88 (float32), giving the right limit 0. numpy's
# errstate as a decorator costs 0.7 us a call, as a `with` block 1.3 (2.3 against 3.3 us at 1x64).
@np.errstate(over="ignore")
def _sigmoid(x):
    e = np.exp(-x)
    if e.ndim == 0:     # a numpy scalar, which has no buffer to write
        return 1 / (1 + e)
    e += 1
    return np.reciprocal(e, out=e)     # 1 / e bit for bit, with no temporary


@kernel("sigmoid")
def sigmoid(X):
    return _sigmoid(X)


@kernel("tanh")
def tanh(X):
    return np.tanh(X)


@kernel("exp")
def exp(X):
    return np.exp(X)


@kernel("log")
def log(X):
    return np.log(X)


@kernel("sqrt")
def sqrt(X):
    return np.sqrt(X)


@kernel("square")
def square(X):
    return np.square(X)


@kernel("abs")
def absolute(X):
    return np.abs(X)


def _elementwise(loop, a, dOut, *scalars):
    """Run a ``pointwise`` gradient loop over flat views; dX has ``a``'s shape and dtype."""
    dx = np.empty(a.shape, a.dtype)
    # the ravel method, not np.ravel's Python wrapper: 1.2 against 1.8 us a call at 1x64
    loop(a.ravel(), dOut.ravel(), dx.reshape(-1), scalars)
    return dx


_relu_grad = pointwise(formulas.relu_grad)
_sigmoid_grad = pointwise(formulas.sigmoid_grad)
_tanh_grad = pointwise(formulas.tanh_grad)
_square_grad = pointwise(formulas.square_grad)


# numba at every size: 1.8 against 2.7 us at 1x32 for numpy's fastest bit-exact form (a sign
# mask), 4.2 against 10 at 64x256.
@kernel("relu_grad")
def relu_grad(Out, dOut):
    return _elementwise(_relu_grad, Out, dOut)


@kernel("sigmoid_grad")
def sigmoid_grad(Out, dOut):
    return _elementwise(_sigmoid_grad, Out, dOut)


@kernel("tanh_grad")
def tanh_grad(Out, dOut):
    return _elementwise(_tanh_grad, Out, dOut)


@kernel("square_grad")
def square_grad(X, dOut):
    return _elementwise(_square_grad, X, dOut)


@kernel("exp_grad")
def exp_grad(Out, dOut):
    return dOut * Out


@kernel("log_grad")
def log_grad(X, dOut):
    return dOut / X


@kernel("sqrt_grad")
def sqrt_grad(Out, dOut):
    return dOut * 0.5 / Out


@kernel("abs_grad")
def abs_grad(X, dOut):
    return dOut * np.sign(X)


# ---- softmax along an axis: 2-D rows with the axis last ----

def as_rows(a, axis):
    """``a`` as a C-contiguous 2-D array whose rows run along ``axis`` (moved last)."""
    if axis % a.ndim != a.ndim - 1:
        a = np.moveaxis(a, axis, -1)
    return np.ascontiguousarray(a).reshape(math.prod(a.shape[:-1]), a.shape[-1])


def from_rows(rows, shape, axis):
    """The inverse of ``as_rows``: 2-D ``rows`` as a C-contiguous array of ``shape``."""
    axis %= len(shape)
    if axis == len(shape) - 1:
        return rows.reshape(shape)
    moved = rows.reshape(shape[:axis] + shape[axis + 1:] + (shape[axis],))
    return np.ascontiguousarray(np.moveaxis(moved, -1, axis))


# Lets LLVM vectorise the row sums (it may add in another order); NaN and inf behave as usual.
_SUMS = {"reassoc", "contract"}


@njit
def _shift_rows(x, shifted, top):
    """``shifted = x - top`` with ``top`` each row's maximum."""
    rows, n = x.shape
    for r in range(rows):
        m = x[r, 0]
        for j in range(1, n):
            m = max(m, x[r, j])
        top[r] = m
        for j in range(n):
            shifted[r, j] = x[r, j] - m


@njit_with(fastmath=_SUMS)
def _normalise_rows(e, out, top, lse, log):
    """From ``e = exp(shifted)`` with ``out`` holding ``shifted``: ``lse = top + log(sum(e))``
    per row, and ``out = e / sum(e)`` (softmax) or, if ``log``, ``out -= log(sum(e))``."""
    rows, n = e.shape
    for r in range(rows):
        total = 0.0
        for j in range(n):
            total += e[r, j]
        log_total = math.log(total)
        lse[r] = top[r] + log_total
        if log:
            for j in range(n):
                out[r, j] -= log_total
        else:
            scale = 1.0 / total
            for j in range(n):
                out[r, j] = e[r, j] * scale


@njit_with(fastmath=_SUMS)
def _softmax_grad_rows(p, dout, dx, log):
    """dX row by row from the probabilities ``p``: softmax ``p * (dout - sum(dout * p))``;
    log-softmax ``dout - p * sum(dout)``."""
    rows, n = p.shape
    for r in range(rows):
        total = 0.0
        for j in range(n):
            total += dout[r, j] if log else dout[r, j] * p[r, j]
        for j in range(n):
            if log:
                dx[r, j] = dout[r, j] - p[r, j] * total
            else:
                dx[r, j] = p[r, j] * (dout[r, j] - total)


def softmax_rows(rows, log=False):
    """Softmax (or log-softmax) of each row of a C-contiguous 2-D array, and each row's
    log-sum-exp in float64 (``lse - x`` keeps its precision when float32 logits are large)."""
    out = np.empty_like(rows)
    top = np.empty(rows.shape[0])
    lse = np.empty(rows.shape[0])
    if rows.size:
        _shift_rows(rows, out, top)
        # exp into a new array: numba vectorises the normalisation only when e is not out
        _normalise_rows(np.exp(out), out, top, lse, log)
    return out, lse


def _softmax_grad(Out, dOut, axis, log):
    out = as_rows(Out, axis)
    dx = np.empty_like(out)
    _softmax_grad_rows(np.exp(out) if log else out, as_rows(dOut, axis), dx, log)
    return from_rows(dx, Out.shape, axis)


@kernel("softmax")
def softmax(X, axis):
    return from_rows(softmax_rows(as_rows(X, axis))[0], X.shape, axis)


@kernel("log_softmax")
def log_softmax(X, axis):
    return from_rows(softmax_rows(as_rows(X, axis), log=True)[0], X.shape, axis)


@kernel("softmax_grad")
def softmax_grad(Out, dOut, axis):
    return _softmax_grad(Out, dOut, axis, log=False)


@kernel("log_softmax_grad")
def log_softmax_grad(Out, dOut, axis):
    return _softmax_grad(Out, dOut, axis, log=True)


# ---- gelu, leaky_relu, clip: one numba pass each for the gradients and for erf ----

_gelu = pointwise(formulas.gelu, inputs=1)
_gelu_grad = pointwise(formulas.gelu_grad)
_leaky_relu_grad = pointwise(formulas.leaky_relu_grad)
_clip_grad = pointwise(formulas.clip_grad)


@kernel("gelu")
def gelu(X, approximate):
    out = np.empty(X.shape, X.dtype)
    _gelu(X.ravel(), out.reshape(-1), (approximate,))
    return out


@kernel("gelu_grad")
def gelu_grad(X, dOut, approximate):
    return _elementwise(_gelu_grad, X, dOut, approximate)


@kernel("leaky_relu")
def leaky_relu(X, alpha):
    return np.where(X > 0, X, X * alpha)


@kernel("leaky_relu_grad")
def leaky_relu_grad(X, dOut, alpha):
    return _elementwise(_leaky_relu_grad, X, dOut, alpha)


def _scalar(tensor, attr):
    """A scalar attribute's value: from its 1-element tensor input when given."""
    return attr if tensor is None else tensor.item()


def _bounds(Min, Max, min, max):
    """The clip bounds: the Min/Max tensors when given, else the attributes."""
    return _scalar(Min, min), _scalar(Max, max)


@kernel("clip")
def clip(X, Min, Max, min, max):
    low, high = _bounds(Min, Max, min, max)
    return np.clip(X, X.dtype.type(low), X.dtype.type(high))


@kernel("clip_grad")
def clip_grad(X, Min, Max, dOut, min, max):
    low, high = _bounds(Min, Max, min, max)
    return _elementwise(_clip_grad, X, dOut, low, high)


@kernel("clip_by_norm")
def clip_by_norm(X, max_norm):
    # cap / max(norm, cap) is cap / norm above the cap and exactly 1 at or below it (Paddle's
    # branch), with no division by a zero norm and no host round trip on a device.
    x = X.reshape(-1)
    cap = X.dtype.type(max_norm)
    return np.asarray(X * (cap / np.maximum(np.sqrt(np.dot(x, x)), cap)))


# ---- softplus, pow: numpy (see the module docstring) ----

@kernel("softplus")
def softplus(X, beta, threshold):
    # Paddle's formula. exp(beta * X) may overflow where the threshold picks X (unused); with a
    # threshold past exp's range (float32: 88.7) Out is inf up to it, as Paddle's.
    xb = X * beta
    with np.errstate(over="ignore"):
        return np.where(xb > threshold, X, np.log1p(np.exp(xb)) / beta)


@kernel("softplus_grad")
def softplus_grad(X, dOut, beta, threshold):
    xb = X * beta
    with np.errstate(over="ignore"):   # exp(-xb) = inf gives the limit 0
        return np.where(xb > threshold, dOut, dOut / (1 + np.exp(-xb)))


@kernel("pow")
def power(X, FactorTensor, factor):
    return X ** _scalar(FactorTensor, factor)


@kernel("pow_grad")
def pow_grad(X, FactorTensor, dOut, factor):
    p = _scalar(FactorTensor, factor)
    if p == 0:   # the formula gives 0 * inf at X = 0; Paddle gives 0
        return np.zeros_like(dOut)
    return dOut * (p * X ** (p - 1))
