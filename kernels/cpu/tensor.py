"""fill_constant, uniform_random, gaussian_random, assign, reshape2, transpose2 and gradients."""
import numpy as np

from tape import dtypes
from tape.random import generator
from tape.registry import kernel


def _rng(seed: int) -> np.random.Generator:
    return generator() if seed == 0 else np.random.default_rng(seed)


def _draw_dtype(dtype: int) -> np.dtype:
    """numpy draws float32 or float64; float16 is drawn as float32 and cast."""
    return np.dtype(np.float64) if dtype == dtypes.FP64 else np.dtype(np.float32)


@kernel("fill_constant", types=dtypes.ALL)
def fill_constant(ValueTensor, shape, dtype, value, str_value):
    out_dtype = dtypes.to_numpy(dtype)
    if ValueTensor is not None:
        value = ValueTensor.reshape(-1)[0]
    elif str_value:
        # int() keeps integers past 2**53 exact; float() reads the rest, inf and nan included
        is_int = out_dtype.kind in "iu" and str_value.lstrip("+-").isdigit()
        value = int(str_value) if is_int else float(str_value)
    return np.full(shape, value, out_dtype)


@kernel("uniform_random", types=dtypes.FLOATING)
def uniform_random(shape, dtype, min, max, seed, diag_num, diag_step, diag_val):
    out = _rng(seed).random(shape, dtype=_draw_dtype(dtype))
    out *= max - min
    out += min
    out = out.astype(dtypes.to_numpy(dtype), copy=False)
    if diag_num:
        out.reshape(-1)[:diag_num * (diag_step + 1):diag_step + 1] = diag_val
    return out


@kernel("gaussian_random", types=dtypes.FLOATING)
def gaussian_random(shape, mean, std, seed, dtype):
    out = _rng(seed).standard_normal(shape, dtype=_draw_dtype(dtype))
    out *= std
    out += mean
    return out.astype(dtypes.to_numpy(dtype), copy=False)


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
