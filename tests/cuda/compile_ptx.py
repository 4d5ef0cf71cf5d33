"""Compile each CUDA kernel to PTX with numba's CUDA compiler, for every argument types the
kernel tests launch it with, and report what fails. Needs CUDA's NVVM (a toolkit, or the
``nvidia-cuda-nvcc-cu12`` wheel with CUDA_HOME pointing at it), no GPU.

The simulator runs kernels as Python: this is what type-checks them as the GPU compiles them.
Run as a script (not under the simulator); exit status 3 means NVVM is missing.
"""
import sys
import types

import numpy as np
from cuda_cases import DTYPES, forward_case, grad_case, has_grad_kernel, run_both
from numba import cuda, typeof
from numba.cuda import dispatcher

from tape.kernels.cuda import device

CAPABILITY = (7, 5)
_compiled = set()


def _compile_instead_of_launch(kernel, size, *args):
    signature = tuple(typeof(a) for a in args)
    if size > 0 and (kernel.py_func, signature) not in _compiled:
        cuda.compile_ptx(kernel.py_func, signature, cc=CAPABILITY)
        _compiled.add((kernel.py_func, signature))


def main(ops, seeds) -> int:
    try:
        cuda.compile_ptx(lambda a: None, (typeof(np.zeros(1)),), cc=CAPABILITY)
    except Exception as error:   # noqa: BLE001 - any failure here means no usable NVVM
        print(f"no NVVM to compile with: {error}")
        return 3
    device.device_module = lambda: np     # nothing runs: host arrays stand in
    # device functions compile for the current device's capability: there is no device
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=CAPABILITY)
    for name, module in list(sys.modules.items()):
        if name.startswith("tape.kernels.cuda.") and hasattr(module, "launch"):
            module.launch = _compile_instead_of_launch
    failures = []
    for op_type in ops:
        for dtype in DTYPES:
            for seed in seeds:
                try:
                    inputs, attrs = forward_case(op_type, seed, dtype)
                    run_both(op_type, inputs, attrs)
                    if has_grad_kernel(op_type):
                        grad_type, inputs, attrs, wants = grad_case(op_type, seed, dtype)
                        run_both(grad_type, inputs, attrs, wants)
                except Exception as error:   # noqa: BLE001 - collect them all
                    failures.append(f"{op_type} {dtype} seed {seed}: {error!r}"[:2000])
    print(f"{len(_compiled)} kernel signatures compiled")
    print("\n".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    from tape.kernels.cuda import KERNELS
    from tape.registry import REGISTRY
    selected = sys.argv[1:] or sorted(t for t, info in REGISTRY.items()
                                      if info.case is not None and t in KERNELS
                                      and t != "save_combine")
    sys.exit(main(selected, range(3)))
