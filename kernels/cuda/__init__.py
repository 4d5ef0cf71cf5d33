"""CUDAPlace kernels: cupy arrays, cuBLAS through cupy, and numba.cuda kernels for the fused loops.

``KERNELS`` maps op type -> kernel function. Each takes the parameters of the op's CPU kernel
(input slots, ``d<Slot>`` gradients, attributes, ``wants``) and returns what it returns, so the
core registers them as they are, for the dtypes of the CPU kernel. ``import tape`` does not
import this package (it imports numba.cuda, which decides then between GPU and simulator), and
importing it does not import cupy. Under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the
same kernels run on numpy arrays: that is how CI checks them without a GPU (tests/cuda).
"""
from . import (  # noqa: F401
    activation,
    collective,
    conv,
    dropout,
    elementwise,
    embedding,
    generic,
    indexing,
    interp,
    loss,
    norm,
    optimizer,
    pad,
    pool,
    rearrange,
    relu_variants,
    rnn,
)
from .device import KERNELS, array_module, device_module, simulated, to_device, to_host

__all__ = ["KERNELS", "array_module", "device_module", "simulated", "to_device", "to_host"]
