"""Activation kernels on the GPU: one numba.cuda pass per gradient (the formulas of
kernels/formulas.py, as on the CPU), and softmax by rows.

The forward ufuncs (relu, sigmoid, tanh, exp, log, sqrt, square, abs, leaky_relu, softplus,
pow, clip) and the ufunc-only gradients (exp_grad, log_grad, sqrt_grad, abs_grad, softplus_grad,
pow_grad) are the CPU kernels themselves, clip_by_norm the CPU kernel with the device array
module: cupy dispatches numpy's ufuncs and array functions (see generic.py). Softmax runs one
thread per row along ``axis`` on the input viewed as (outer, n, inner), so no transpose copy is
made for an inner axis.
"""
import math

from numba import cuda

from .. import formulas
from ..cpu.activation import _bounds
from .device import array_module, cuda_kernel, launch, pointwise


def _pointwise(formula, a, dOut, *scalars):
    """Run ``formula(a[i], dOut[i], *scalars)`` over flat views; dX has ``a``'s shape and
    dtype."""
    xp = array_module(a, dOut)
    dx = xp.empty(a.shape, a.dtype)
    launch(pointwise(formula), dx.size, xp.ravel(a), xp.ravel(dOut), dx.reshape(-1), scalars)
    return dx


@cuda_kernel("relu_grad")
def relu_grad(Out, dOut):
    return _pointwise(formulas.relu_grad, Out, dOut)


@cuda_kernel("sigmoid_grad")
def sigmoid_grad(Out, dOut):
    return _pointwise(formulas.sigmoid_grad, Out, dOut)


@cuda_kernel("tanh_grad")
def tanh_grad(Out, dOut):
    return _pointwise(formulas.tanh_grad, Out, dOut)


@cuda_kernel("square_grad")
def square_grad(X, dOut):
    return _pointwise(formulas.square_grad, X, dOut)


@cuda_kernel("leaky_relu_grad")
def leaky_relu_grad(X, dOut, alpha):
    return _pointwise(formulas.leaky_relu_grad, X, dOut, alpha)


@cuda_kernel("clip_grad")
def clip_grad(X, Min, Max, dOut, min, max):
    low, high = _bounds(Min, Max, min, max)
    return _pointwise(formulas.clip_grad, X, dOut, low, high)


@cuda_kernel("gelu")
def gelu(X, approximate):
    xp = array_module(X)
    out = xp.empty(X.shape, X.dtype)
    launch(pointwise(formulas.gelu, inputs=1), out.size, xp.ravel(X), out.reshape(-1),
           (approximate,))
    return out


@cuda_kernel("gelu_grad")
def gelu_grad(X, dOut, approximate):
    return _pointwise(formulas.gelu_grad, X, dOut, approximate)


# ---- softmax along an axis ----

def around_axis(a, axis):
    """``a`` as a C-contiguous (outer, n, inner) array, ``n`` its length along ``axis``: the
    rows along ``axis`` are the (outer, inner) pairs, and no data moves."""
    xp = array_module(a)
    axis %= max(a.ndim, 1)
    shape = a.shape or (1,)
    return xp.ascontiguousarray(a).reshape(math.prod(shape[:axis]), shape[axis],
                                           math.prod(shape[axis + 1:]))


@cuda.jit(device=True)
def softmax_row(x, o, i, out):
    """Softmax of row (o, :, i) of x into ``out`` (if it is not None); returns its log-sum-exp
    (float64, so that ``lse - x`` keeps its precision for large float32 logits)."""
    n = x.shape[1]
    top = x[o, 0, i]
    for j in range(1, n):
        if x[o, j, i] > top:
            top = x[o, j, i]
    total = 0.0
    for j in range(n):
        total += math.exp(x[o, j, i] - top)
    if out is not None:
        scale = 1.0 / total
        for j in range(n):
            out[o, j, i] = math.exp(x[o, j, i] - top) * scale
    return top + math.log(total)


@cuda.jit
def _softmax_rows(x, out, log):
    outer, n, inner = x.shape
    for row in range(cuda.grid(1), outer * inner, cuda.gridsize(1)):
        o, i = row // inner, row % inner
        if log:
            lse = softmax_row(x, o, i, None)
            for j in range(n):
                out[o, j, i] = x[o, j, i] - lse
        else:
            softmax_row(x, o, i, out)


@cuda.jit
def softmax_grad_rows(out, dout, dx, log):
    """dX row by row from the softmax (or, if ``log``, the log-softmax) ``out``: softmax
    ``p * (dout - sum(dout * p))``; log-softmax ``dout - exp(out) * sum(dout)``."""
    outer, n, inner = out.shape
    for row in range(cuda.grid(1), outer * inner, cuda.gridsize(1)):
        o, i = row // inner, row % inner
        total = 0.0
        for j in range(n):
            total += dout[o, j, i] if log else dout[o, j, i] * out[o, j, i]
        for j in range(n):
            if log:
                dx[o, j, i] = dout[o, j, i] - math.exp(out[o, j, i]) * total
            else:
                dx[o, j, i] = out[o, j, i] * (dout[o, j, i] - total)


def _softmax(X, axis, log):
    x = around_axis(X, axis)
    out = array_module(x).empty_like(x)
    launch(_softmax_rows, x.shape[0] * x.shape[2], x, out, log)
    return out.reshape(X.shape)


def _softmax_grad(Out, dOut, axis, log):
    out = around_axis(Out, axis)
    dx = array_module(out).empty_like(out)
    launch(softmax_grad_rows, out.shape[0] * out.shape[2], out, around_axis(dOut, axis), dx, log)
    return dx.reshape(Out.shape)


@cuda_kernel("softmax")
def softmax(X, axis):
    return _softmax(X, axis, log=False)


@cuda_kernel("log_softmax")
def log_softmax(X, axis):
    return _softmax(X, axis, log=True)


@cuda_kernel("softmax_grad")
def softmax_grad(Out, dOut, axis):
    return _softmax_grad(Out, dOut, axis, log=False)


@cuda_kernel("log_softmax_grad")
def log_softmax_grad(Out, dOut, axis):
    return _softmax_grad(Out, dOut, axis, log=True)
