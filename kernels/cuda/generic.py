"""The simple ops on the GPU: CPU kernels that serve both places.

- ``SAME_AS_CPU``: kernels written with operators, array methods and numpy ufuncs or array
  functions, which cupy arrays dispatch to cupy (``__array_ufunc__``, ``__array_function__``):
  the CPU function itself. Their XShape outputs stay zero-element host arrays: they carry only
  a shape, as the tape's shape-only stand-ins do.
- CPU kernels that create arrays with numpy (``np.asarray``, ``np.empty``, ``np.full``, ...):
  the same code with the device array module as ``np`` (``on_device``).
- Random ops draw on the host with the CPU kernel, so a seed gives the same values on every
  place, and copy to the device; feed, fetch and the combined-file ops move values across.
"""
import numpy as np

from tape import dtypes
from tape.place import CPU
from tape.registry import op_info

from ..cpu import activation, creation, io, math, reduce, tensor
from ..cpu import manipulation as cpu_manipulation
from .broadcast import unbroadcast
from .device import KERNELS, array_module, cuda_kernel, on_device, to_device, to_host, with_globals

SAME_AS_CPU = (
    "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "exp_grad", "log_grad",
    "sqrt_grad", "leaky_relu", "clip", "abs", "abs_grad", "softplus", "softplus_grad", "pow",
    "pow_grad",
    "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
    "elementwise_max", "elementwise_min", "elementwise_pow",
    "less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal", "where",
    "logical_not", "increment",
    "where_grad",
    "mul", "mul_grad", "scale", "sum",
    "assign", "assign_grad", "cast", "cast_grad", "reshape2", "reshape2_grad",
    "concat", "concat_grad", "split", "slice", "stack", "stack_grad", "squeeze2",
    "squeeze2_grad", "unsqueeze2", "unsqueeze2_grad", "flatten_contiguous_range",
    "flatten_contiguous_range_grad", "fill_zeros_like",
)
for _op in SAME_AS_CPU:
    KERNELS[_op] = op_info(_op).kernel(CPU, dtypes.FP32).fn

cuda_kernel("matmul_v2")(on_device(math.matmul_v2))
cuda_kernel("matmul_v2_grad")(with_globals(math.matmul_v2_grad, unbroadcast=unbroadcast))

_spread = on_device(reduce._spread)
for _op in ("mean", "mean_grad", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
            "squared_l2_norm", "squared_l2_norm_grad"):
    cuda_kernel(_op)(on_device(getattr(reduce, _op)))
for _op in ("reduce_max_grad", "reduce_min_grad"):
    cuda_kernel(_op)(on_device(reduce.reduce_extreme_grad))
for _op in ("reduce_sum_grad", "reduce_mean_grad"):
    cuda_kernel(_op)(with_globals(getattr(reduce, _op), _spread=_spread))

cuda_kernel("clip_by_norm")(on_device(activation.clip_by_norm))
cuda_kernel("slice_grad")(on_device(cpu_manipulation.slice_grad))
cuda_kernel("transpose2")(on_device(tensor.transpose2))
for _op in ("fill_constant", "fill_any_like", "assign_value", "shape"):
    cuda_kernel(_op)(on_device(getattr(creation, _op)))


@cuda_kernel("range")
def range_kernel(Start, End, Step):
    return to_device(creation.range_kernel(to_host(Start), to_host(End), to_host(Step)))


@cuda_kernel("transpose2_grad")
def transpose2_grad(dOut, axis):
    inverse = np.argsort([a % dOut.ndim for a in axis])    # on the host: axis is a list
    return array_module(dOut).ascontiguousarray(dOut.transpose(inverse))


@cuda_kernel("uniform_random")
def uniform_random(ShapeTensor, ShapeTensorList, shape, dtype, min, max, seed, diag_num,
                   diag_step, diag_val):
    return to_device(creation.uniform_random(ShapeTensor, ShapeTensorList, shape, dtype, min,
                                             max, seed, diag_num, diag_step, diag_val))


@cuda_kernel("gaussian_random")
def gaussian_random(ShapeTensor, ShapeTensorList, shape, mean, std, seed, dtype):
    return to_device(creation.gaussian_random(ShapeTensor, ShapeTensorList, shape, mean, std,
                                              seed, dtype))


@cuda_kernel("feed")
def feed(X, col):
    return to_device(X[col])


@cuda_kernel("fetch")
def fetch(X):
    return to_host(X)


@cuda_kernel("save_combine")
def save_combine(X, file_path, overwrite, save_as_fp16):
    io.save_combine([to_host(x) for x in X], file_path, overwrite, save_as_fp16)


@cuda_kernel("load_combine")
def load_combine(file_path, load_as_fp16):
    return [to_device(a) for a in io.load_combine(file_path, load_as_fp16)]
