"""References for relu6, hard_sigmoid, hard_swish, swish, silu, mish, elu, selu and prelu: the
definitions written plainly in numpy (float64 math where a function is transcendental)."""
import numpy as np


def relu6(X):
    return np.clip(X, 0.0, 6.0).astype(X.dtype)


def hard_sigmoid(X, slope, offset):
    return np.clip(slope * X + offset, 0.0, 1.0).astype(X.dtype)


def hard_swish(X, threshold, scale, offset):
    return (X * np.clip(X + offset, 0.0, threshold) / scale).astype(X.dtype)


def _swish(X):
    x = X.astype(np.float64)
    return (x / (1.0 + np.exp(-x))).astype(X.dtype)


def swish(X):
    return _swish(X)


def silu(X):
    return _swish(X)


def mish(X, threshold):
    x = X.astype(np.float64)
    softplus = np.where(x > threshold, x, np.log(1.0 + np.exp(np.minimum(x, 50.0))))
    return (x * np.tanh(softplus)).astype(X.dtype)


def elu(X, alpha):
    x = X.astype(np.float64)
    return np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0.0)) - 1.0)).astype(X.dtype)


def selu(X, scale, alpha):
    x = X.astype(np.float64)
    return (scale * np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0.0)) - 1.0))).astype(
        X.dtype)


def prelu(X, Alpha, mode, data_format):
    """One slope for every element, one per channel, or one per position within a sample."""
    out = X.copy()
    for index in np.ndindex(X.shape):
        if X[index] > 0:
            continue
        if mode == "all":
            slope = Alpha.reshape(-1)[0]
        elif mode == "channel":
            slope = Alpha.reshape(-1)[index[-1] if data_format == "NHWC" else index[1]]
        else:
            slope = Alpha.reshape(-1)[np.ravel_multi_index(index[1:], X.shape[1:])]
        out[index] = slope * X[index]
    return out
