"""ReLU's variants: numpy ufuncs forward (mish: a numba pass, three transcendentals an element);
the gradients that read one array a numba pass over a formula of kernels/formulas.py, the ones
that read two (silu, elu) and prelu's numpy.

Written with ufuncs, ``np.where`` and array methods only, so that the forward kernels serve
cupy arrays too (kernels/cuda/relu_variants.py).
"""
import math

import numpy as np

from tape.registry import kernel

from .. import formulas
from ..jit import pointwise
from .activation import _elementwise, _sigmoid


@kernel("relu6")
def relu6(X):
    return np.minimum(np.maximum(X, 0), 6)


@kernel("hard_sigmoid")
def hard_sigmoid(X, slope, offset):
    return np.minimum(np.maximum(X * slope + offset, 0), 1)


@kernel("hard_swish")
def hard_swish(X, threshold, scale, offset):
    return X * np.minimum(np.maximum(X + offset, 0), threshold) / scale


@kernel("swish")
def swish(X):
    return X * _sigmoid(X)


kernel("silu")(swish)


@np.errstate(over="ignore")   # expm1 of a large positive X, which np.where does not pick
def _exponential_linear(X, alpha):
    return np.where(X > 0, X, np.expm1(X) * alpha)


@kernel("elu")
def elu(X, alpha):
    return _exponential_linear(X, alpha)


@kernel("selu")
def selu(X, scale, alpha):
    return _exponential_linear(X, alpha) * scale


_mish = pointwise(formulas.mish, inputs=1)


@kernel("mish")
def mish(X, threshold):
    out = np.empty(X.shape, X.dtype)
    _mish(X.ravel(), out.reshape(-1), (threshold,))
    return out


# ---- gradients ----

_relu6_grad = pointwise(formulas.relu6_grad)
_hard_sigmoid_grad = pointwise(formulas.hard_sigmoid_grad)
_hard_swish_grad = pointwise(formulas.hard_swish_grad)
_swish_grad = pointwise(formulas.swish_grad)
_mish_grad = pointwise(formulas.mish_grad)
_selu_grad = pointwise(formulas.selu_grad)


@kernel("relu6_grad")
def relu6_grad(Out, dOut):
    return _elementwise(_relu6_grad, Out, dOut)


@kernel("hard_sigmoid_grad")
def hard_sigmoid_grad(Out, dOut, slope):
    return _elementwise(_hard_sigmoid_grad, Out, dOut, slope)


@kernel("hard_swish_grad")
def hard_swish_grad(X, dOut, threshold, scale, offset):
    return _elementwise(_hard_swish_grad, X, dOut, threshold, scale, offset)


@kernel("swish_grad")
def swish_grad(X, dOut):
    return _elementwise(_swish_grad, X, dOut)


@kernel("mish_grad")
def mish_grad(X, dOut, threshold):
    return _elementwise(_mish_grad, X, dOut, threshold)


@kernel("selu_grad")
def selu_grad(Out, dOut, scale, alpha):
    return _elementwise(_selu_grad, Out, dOut, scale, alpha)


@kernel("silu_grad")
def silu_grad(X, Out, dOut):
    # d(x s)/dx = s + x s (1 - s) = s + Out (1 - s), s = sigmoid(x)
    s = _sigmoid(X)
    return dOut * (s + Out * (1 - s))


@kernel("elu_grad")
def elu_grad(X, Out, dOut, alpha):
    # below 0, d(alpha (exp(x) - 1))/dx = alpha exp(x) = Out + alpha, for either sign of alpha
    return np.where(X > 0, dOut, dOut * (Out + alpha))


# ---- prelu ----

def prelu_alpha_shape(x_shape, mode, data_format):
    """The shape Alpha is viewed as to broadcast against X: () for all; C at the channel axis
    (1 for NCHW, last for NHWC) for channel; X's shape past the batch axis for element."""
    if mode == "all":
        return ()
    if mode == "channel":
        if data_format == "NHWC":
            return (x_shape[-1],)
        return (x_shape[1],) + (1,) * (len(x_shape) - 2)
    return tuple(x_shape[1:])


def _slopes(X, Alpha, mode, data_format):
    """Alpha viewed to broadcast against X (element mode: its first values, as Paddle reads
    them, when its first dim is longer than 1)."""
    shape = prelu_alpha_shape(X.shape, mode, data_format)
    return Alpha.reshape(-1)[:math.prod(shape)].reshape(shape)


@kernel("prelu")
def prelu(X, Alpha, mode, data_format):
    return np.where(X > 0, X, X * _slopes(X, Alpha, mode, data_format))


@kernel("prelu_grad")
def prelu_grad(X, Alpha, dOut, mode, data_format, wants):
    slopes = _slopes(X, Alpha, mode, data_format)
    positive = X > 0
    dx = np.where(positive, dOut, dOut * slopes) if "X@GRAD" in wants else None
    dalpha = None
    if "Alpha@GRAD" in wants:
        per_element = np.where(positive, 0, X * dOut)
        lead = per_element.ndim - slopes.ndim
        summed = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(slopes.shape)
                                            if n == 1 and per_element.shape[i + lead] != 1)
        reduced = per_element.sum(axis=summed).reshape(-1)
        dalpha = np.zeros(Alpha.size, Alpha.dtype)
        dalpha[:reduced.size] = reduced
        dalpha = dalpha.reshape(Alpha.shape)
    return dx, dalpha
