"""What every CUDA kernel module shares: the array module, host/device moves, kernel launches and
the ``KERNELS`` table.

Values on a CUDAPlace are cupy arrays, which numba.cuda kernels take through the CUDA array
interface. Under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``: how CI runs these kernels
without a GPU) numpy arrays stand in for them, and ``array_module`` returns numpy: the same code
runs, with only the array module swapped. numba.cuda picks simulator or GPU when it is first
imported, which is when this package is imported (``import tape`` never imports it).

The simulator runs kernels as Python and type-checks nothing: tests/cuda/compile_ptx.py
compiles them for the GPU. Kernels compare instead of calling ``max(a, b)``, which numba 0.68's
built-in CUDA target fails to compile (numba-cuda, the maintained target, compiles it).
"""
import functools
import sys
import types

import numpy as np
from numba import cuda

# Threads per block, and a cap on blocks: the kernels loop with a stride of the whole grid, so a
# launch of any size is correct and the cap only bounds the launch.
THREADS = 128
MAX_BLOCKS = 4096

KERNELS: dict = {}


def cuda_kernel(op_type: str):
    """Record the decorated function as the CUDAPlace kernel of ``op_type`` in ``KERNELS``.

    It takes the parameters of the op's CPU kernel and returns what that kernel returns.
    """
    def record(fn):
        KERNELS[op_type] = fn
        return fn
    return record


def with_globals(fn, **replacements):
    """``fn`` (a CPU kernel or helper) with some of the global names it reads bound to other
    objects: the same code with, say, the GPU's broadcast reduction in place of the CPU's."""
    unknown = set(replacements) - set(fn.__code__.co_names)
    if unknown:
        raise NameError(f"{fn.__qualname__} reads no global named {sorted(unknown)}")
    scope = {**fn.__globals__, **replacements}
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


def array_module(*arrays):
    """cupy if one of ``arrays`` is a cupy array, else numpy (Chainer's get_array_module).

    Never imports cupy: a cupy array exists only once cupy was imported.
    """
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        for a in arrays:
            if isinstance(a, cupy.ndarray):
                return cupy
    return np


def simulated() -> bool:
    """Whether numba.cuda is the CUDA simulator."""
    return cuda.jit.__module__.startswith("numba.cuda.simulator")


def device_module():
    """The array module of device values: numpy under the simulator, else cupy."""
    if simulated():
        return np
    import cupy
    return cupy


class _DeviceArrays:
    """The device array module, looked up on use (cupy; numpy under the simulator).

    Bound as ``np`` into a CPU kernel whose numpy calls cupy has under the same names and
    arguments (``on_device``), it makes that kernel a GPU kernel: the same code, with only the
    array module swapped.
    """

    def __getattr__(self, name):
        return getattr(device_module(), name)


DEVICE = _DeviceArrays()


def on_device(fn, **replacements):
    """``fn`` with ``replacements`` (``with_globals``) and, if it reads ``np``, the device array
    module for numpy."""
    if "np" in fn.__code__.co_names:
        replacements["np"] = DEVICE
    return with_globals(fn, **replacements)


def on_device_using(fn, helpers: dict):
    """``on_device(fn)`` with those of ``helpers`` (name -> device version) that ``fn`` reads."""
    names = fn.__code__.co_names
    return on_device(fn, **{k: v for k, v in helpers.items() if k in names})


def to_device(a):
    """A host array as a device array (the array itself under the simulator)."""
    return device_module().asarray(a)


def to_host(a) -> np.ndarray:
    """A device (or host) array as a new numpy array."""
    xp = array_module(a)
    return xp.asnumpy(a) if xp is not np else np.array(a, copy=True)


@functools.cache
def device_function(formula):
    """A formula of ``kernels/formulas.py`` as a numba.cuda device function."""
    return cuda.jit(device=True)(formula)


@functools.cache
def pointwise(formula, inputs=2):
    """A kernel ``kernel(*arrays, out, scalars)`` setting ``out[i] = formula(*(a[i] for a in
    arrays), *scalars)`` over ``inputs`` flat arrays (the CPU's ``kernels.jit.pointwise``, a
    thread per element)."""
    f = device_function(formula)
    if inputs == 1:
        def unary(a, out, scalars):
            for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
                out[i] = f(a[i], *scalars)
        return cuda.jit(unary)

    def binary(a, b, out, scalars):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = f(a[i], b[i], *scalars)
    return cuda.jit(binary)


def launch(kernel, size: int, *args) -> None:
    """Run a ``@cuda.jit`` kernel that strides over ``size`` work items (nothing if none)."""
    if size <= 0:
        return
    threads = min(THREADS, size)
    blocks = min(-(-size // threads), MAX_BLOCKS)
    kernel[blocks, threads](*args)


def first_bad(flag, count: int) -> int:
    """The index a kernel left in the 1-element ``flag`` (created by ``bad_flag``) with
    ``cuda.atomic.min``, or -1 if it left none."""
    index = int(flag[0])
    return -1 if index >= count else index


def bad_flag(xp, count: int):
    """A 1-element int64 array holding ``count`` (past any index), for ``first_bad``."""
    return xp.full(1, count, np.int64)
