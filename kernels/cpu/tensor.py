"""assign, reshape2, transpose2, cast and their gradients."""
import numpy as np

from tape import dtypes
from tape.registry import kernel


@kernel("assign", types=dtypes.ALL)
def assign(X):
    return X.copy()


def xshape_array(X):
    """(0,) + X.shape: carries X's shape to the gradient; zero elements, so no buffer."""
    return np.empty((0,) + X.shape, X.dtype)


@kernel("assign_grad", types=dtypes.FLOATING)
def assign_grad(dOut):
    return dOut


@kernel("reshape2", types=dtypes.ALL)
def reshape2(X, shape):
    out = X.reshape([X.shape[i] if n == 0 else n for i, n in enumerate(shape)])
    return out, xshape_array(X)


@kernel("reshape2_grad", types=dtypes.FLOATING)
def reshape2_grad(XShape, dOut):
    return dOut.reshape(XShape.shape[1:])


@kernel("transpose2", types=dtypes.ALL)
def transpose2(X, axis):
    return np.ascontiguousarray(X.transpose(axis)), xshape_array(X)


@kernel("transpose2_grad", types=dtypes.FLOATING)
def transpose2_grad(dOut, axis):
    inverse = np.argsort([a % dOut.ndim for a in axis])
    return np.ascontiguousarray(dOut.transpose(inverse))


@kernel("cast", types=dtypes.ALL)
def cast(X, out_dtype):
    return X.astype(dtypes.to_numpy(out_dtype))


@kernel("cast_grad", types=dtypes.ALL)
def cast_grad(X, dOut):
    if X.dtype.kind != "f" or dOut.dtype.kind != "f":
        return None    # no gradient through integers
    return dOut.astype(X.dtype)
