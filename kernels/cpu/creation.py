"""fill_constant, uniform_random, gaussian_random, fill_any_like, assign_value, range, shape."""
import math

import numpy as np

from tape import dtypes
from tape.errors import InvalidArgumentError
from tape.random import generator
from tape.registry import kernel


def out_shape(op: str, shape, ShapeTensor, ShapeTensorList) -> tuple:
    """The shape ShapeTensor or ShapeTensorList holds (each size must agree with a known one in
    the attribute ``shape``), else ``shape``."""
    if ShapeTensor is not None:
        slot, sizes = "ShapeTensor", [int(n) for n in ShapeTensor.reshape(-1).tolist()]
    elif ShapeTensorList:
        slot, sizes = "ShapeTensorList", []
        for i, t in enumerate(ShapeTensorList):
            if t.size != 1:
                raise InvalidArgumentError(f"{op}: ShapeTensorList[{i}] must hold one element, "
                                           f"holds {t.size}")
            sizes.append(int(t.reshape(-1)[0]))
    else:
        return tuple(shape)
    for i, n in enumerate(sizes):
        if n < 0 or shape and shape[i] >= 0 and shape[i] != n:
            expected = f"{shape[i]} (attribute shape)" if shape and shape[i] >= 0 else ">= 0"
            raise InvalidArgumentError(f"{op}: {slot} gives size {n} for dim {i}, expected "
                                       f"{expected}")
    return tuple(sizes)


def _rng(seed: int) -> np.random.Generator:
    return generator() if seed == 0 else np.random.default_rng(seed)


def _draw_dtype(dtype: int) -> np.dtype:
    """numpy draws float32 or float64; float16 is drawn as float32 and cast."""
    return np.dtype(np.float64) if dtype == dtypes.FP64 else np.dtype(np.float32)


@kernel("fill_constant", types=dtypes.ALL)
def fill_constant(ValueTensor, ShapeTensor, ShapeTensorList, shape, dtype, value, str_value):
    out_dtype = dtypes.to_numpy(dtype)
    if ValueTensor is not None:
        value = ValueTensor.reshape(-1)[0]
    elif str_value:
        # int() keeps integers past 2**53 exact; float() reads the rest, inf and nan included
        is_int = out_dtype.kind in "iu" and str_value.lstrip("+-").isdigit()
        value = int(str_value) if is_int else float(str_value)
    return np.full(out_shape("fill_constant", shape, ShapeTensor, ShapeTensorList), value,
                   out_dtype)


# Registered for every dtype: an int shape tensor, the only input, picks the kernel; the dtype
# attribute (floating, checked) decides Out.
@kernel("uniform_random", types=dtypes.ALL)
def uniform_random(ShapeTensor, ShapeTensorList, shape, dtype, min, max, seed, diag_num,
                   diag_step, diag_val):
    shape = out_shape("uniform_random", shape, ShapeTensor, ShapeTensorList)
    if diag_num and (diag_num - 1) * (diag_step + 1) >= math.prod(shape):
        raise InvalidArgumentError(f"uniform_random: diag_num={diag_num} with "
                                   f"diag_step={diag_step} passes the {math.prod(shape)} "
                                   f"elements of shape {list(shape)}")
    out = _rng(seed).random(shape, dtype=_draw_dtype(dtype))
    out *= max - min
    out += min
    out = out.astype(dtypes.to_numpy(dtype), copy=False)
    if diag_num:
        out.reshape(-1)[:diag_num * (diag_step + 1):diag_step + 1] = diag_val
    return out


@kernel("gaussian_random", types=dtypes.ALL)
def gaussian_random(ShapeTensor, ShapeTensorList, shape, mean, std, seed, dtype):
    shape = out_shape("gaussian_random", shape, ShapeTensor, ShapeTensorList)
    out = _rng(seed).standard_normal(shape, dtype=_draw_dtype(dtype))
    out *= std
    out += mean
    return out.astype(dtypes.to_numpy(dtype), copy=False)


@kernel("fill_any_like", types=dtypes.ALL)
def fill_any_like(X, value, dtype):
    return np.full(X.shape, value, X.dtype if dtype == -1 else dtypes.to_numpy(dtype))


@kernel("assign_value", types=dtypes.ALL)
def assign_value(shape, dtype, values):
    return np.array(values, dtypes.to_numpy(dtype)).reshape(shape)


@kernel("range", types=(dtypes.INT32, dtypes.INT64, dtypes.FP32, dtypes.FP64))
def range_kernel(Start, End, Step):
    kind = Start.dtype.type
    start, end, step = (kind(t.reshape(-1)[0]) for t in (Start, End, Step))
    if step == 0 or (start < end and step < 0) or (start > end and step > 0):
        raise InvalidArgumentError(f"range: Step={step} must be nonzero and point from "
                                   f"Start={start} toward End={end}")
    if np.issubdtype(kind, np.integer):
        size = (abs(int(end) - int(start)) + abs(int(step)) - 1) // abs(int(step))
    else:
        size = int(np.ceil(np.abs((end - start) / step)))
    # each value the previous plus Step, accumulated in Out's dtype, as Paddle's kernel does
    out = np.full(size, step, kind)
    if size:
        out[0] = start
    return np.add.accumulate(out, dtype=kind)


@kernel("shape", types=dtypes.ALL)
def shape(Input):
    return np.array(Input.shape, np.int32)
