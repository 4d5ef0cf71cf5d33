"""The CUDA kernel package: what importing it does, its table, its array-module helpers."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
from cuda_cases import ON_DEVICE

import tape
from tape.kernel_binding import Kernel
from tape.kernels import cuda as gpu
from tape.registry import REGISTRY


def _run(code: str, **env) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **env}, check=True)
    return result.stdout.strip()


def test_import_tape_imports_neither_the_cuda_package_nor_numba_cuda_nor_cupy():
    loaded = _run("import sys, tape; print(sorted(m for m in ('tape.kernels.cuda', 'numba.cuda',"
                  " 'cupy') if m in sys.modules))")
    assert loaded == "[]"


def test_the_cuda_package_does_not_import_cupy():
    loaded = _run("import sys, tape.kernels.cuda; print('cupy' in sys.modules)",
                  NUMBA_ENABLE_CUDASIM="1")
    assert loaded == "False"


def test_the_simulator_flag_leaves_the_cpu_kernels_alone():
    """With the flag set after numba was imported and config re-read, as conftest does, a CPU
    kernel compiled before and after gives the same result, and numba.cuda is the simulator."""
    code = """
import os, numpy as np, tape
from tape.registry import op_info
fn = op_info("relu_grad").kernel(tape.CPUPlace(), tape.dtypes.FP64).fn
out, dout = np.linspace(-1, 1, 7), np.arange(7.0)
before = fn(out, dout)
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
from numba.core import config; config.reload_config()
softmax = op_info("softmax").kernel(tape.CPUPlace(), tape.dtypes.FP64).fn(dout, -1)
import tape.kernels.cuda as gpu
print(np.array_equal(before, fn(out, dout)), np.isclose(softmax.sum(), 1.0), gpu.simulated())
"""
    assert _run(code) == "True True True"


def test_every_op_with_a_cpu_kernel_has_a_cuda_kernel_with_the_same_parameters():
    for op_type, info in REGISTRY.items():
        if not info.kernels:
            continue
        assert op_type in gpu.KERNELS, f"{op_type}: no CUDA kernel in tape.kernels.cuda.KERNELS"
        cpu = info.kernel(tape.CPUPlace(), _some_dtype(info))
        cuda = Kernel(gpu.KERNELS[op_type], info)
        assert inspect.signature(cuda.fn).parameters.keys() == \
            inspect.signature(cpu.fn).parameters.keys(), op_type
        assert cuda.reads() == cpu.reads(), f"{op_type}: reads other input slots than on the CPU"


def _some_dtype(info):
    return next(d for p, d in info.kernels if p == tape.CPUPlace().key)


def test_array_module_is_numpy_for_numpy_arrays():
    assert gpu.array_module(np.zeros(2), 1.0) is np
    assert gpu.array_module() is np


@pytest.mark.skipif(ON_DEVICE, reason="the simulator's device arrays are numpy arrays")
def test_under_the_simulator_device_arrays_are_numpy_arrays():
    assert gpu.simulated() and gpu.device_module() is np
    host = np.arange(3.0)
    assert gpu.to_device(host) is host
    copy = gpu.to_host(host)
    assert copy is not host and np.array_equal(copy, host)


def test_with_globals_rejects_a_name_the_function_does_not_read():
    with pytest.raises(NameError, match=r"reads no global named \['unbroadcast'\]"):
        gpu.device.with_globals(_some_dtype, unbroadcast=None)
