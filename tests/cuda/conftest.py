"""The CUDA kernels run here under numba's CUDA simulator, numpy arrays standing in for cupy.

numba.cuda becomes the simulator or the GPU target when it is first imported, as
``numba.core.config.ENABLE_CUDASIM`` says then; numba reads that from the environment when it is
imported and again before each compilation. So the flag is set, and numba's config re-read,
here, before anything imports numba.cuda: ``import tape`` does not, ``tape.kernels.cuda`` does.
The flag changes only what numba.cuda is: the CPU kernels (numba.njit) never read it, so they
compile, cache and run as without it.

With ``TAPE_CUDA_TESTS=device`` the same tests run on a GPU with cupy arrays instead
(test_cuda_gpu.py starts such a run in a child process when a GPU is present).
"""
import os
import sys

import pytest

ON_DEVICE = os.environ.get("TAPE_CUDA_TESTS") == "device"

if not ON_DEVICE:
    if "numba.cuda" in sys.modules and not sys.modules["numba.cuda"].jit.__module__.startswith(
            "numba.cuda.simulator"):
        raise pytest.UsageError("tests/cuda: numba.cuda was imported for the GPU before the "
                                "CUDA simulator could be enabled; run tests/cuda in its own "
                                "process")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if "numba" in sys.modules:
        from numba.core import config
        config.reload_config()
