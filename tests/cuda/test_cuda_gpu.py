"""What the simulator cannot check: that the kernels compile for a GPU, and that they run on one.

Both run in a child process without the simulator flag (numba.cuda is the simulator in this
one), and skip, saying why, where the machine lacks what they need.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_cases import ON_DEVICE

HERE = Path(__file__).parent
pytestmark = pytest.mark.skipif(ON_DEVICE, reason="already the GPU run")


def _child(*args, **env):
    environ = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=HERE,
                          env={**environ, **env}, timeout=1800)


def test_kernels_compile_to_ptx():
    result = _child("compile_ptx.py")
    if result.returncode == 3:
        pytest.skip("needs CUDA's NVVM to compile the kernels to PTX (a CUDA toolkit, or "
                    "pip install nvidia-cuda-nvcc-cu12 and CUDA_HOME=<site-packages>/nvidia/"
                    f"cuda_nvcc): {result.stdout.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr


def _gpu_present() -> bool:
    probe = _child("-c", "import cupy; assert cupy.cuda.runtime.getDeviceCount() > 0")
    return probe.returncode == 0


def test_kernels_match_cpu_on_a_gpu():
    if not _gpu_present():
        pytest.skip("needs an NVIDIA GPU and cupy (pip install -e '.[cuda]'); CI checks the "
                    "kernels under numba's CUDA simulator instead")
    result = _child("-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE),
                    TAPE_CUDA_TESTS="device")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
