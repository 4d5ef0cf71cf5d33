"""References for mul, matmul_v2, scale and sum."""
import numpy as np


def mul(X, Y, x_num_col_dims, y_num_col_dims):
    rows = int(np.prod(X.shape[:x_num_col_dims]))
    inner = int(np.prod(Y.shape[:y_num_col_dims]))
    out = np.dot(X.reshape(rows, -1), Y.reshape(inner, -1))
    return out.reshape(X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:])


def matmul_v2(X, Y, trans_x, trans_y):
    x = X[np.newaxis, :] if X.ndim == 1 else (np.swapaxes(X, -1, -2) if trans_x else X)
    y = Y[:, np.newaxis] if Y.ndim == 1 else (np.swapaxes(Y, -1, -2) if trans_y else Y)
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    x = np.broadcast_to(x, batch + x.shape[-2:])
    y = np.broadcast_to(y, batch + y.shape[-2:])
    out = np.einsum("...ik,...kj->...ij", x, y)
    if X.ndim == 1:
        out = out[..., 0, :]
    if Y.ndim == 1:
        out = out[..., 0]
    return out


def scale(X, scale, bias, bias_after_scale):
    if X.dtype.kind == "i":
        scale, bias = int(scale), int(bias)     # cast to X's type first, as Paddle does
    return scale * X + bias if bias_after_scale else scale * (X + bias)


def sum(X):
    return np.add.reduce(np.stack(X), axis=0)
