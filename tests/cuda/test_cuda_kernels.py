"""Every CUDA kernel against the op's CPU kernel, on the op's generic-test cases, in float32 and
float64 (under numba's CUDA simulator in CI; see conftest.py)."""
import numpy as np
import pytest
from cuda_cases import forward_case, grad_case, has_grad_kernel, max_difference, run_both

import tape
from tape.kernel_binding import Kernel
from tape.kernels import cuda as gpu
from tape.registry import REGISTRY

SEEDS = range(8)
# CPU and GPU sum in other orders, and the simulator computes in float32 where numba promotes
# to float64: differences are rounding, relative to the largest value of an output.
TOLERANCE = {np.float32: 2e-6, np.float64: 1e-12}
# save_combine writes a file: compared in its own test.
OWN_TESTS = {"save_combine"}
FORWARD = sorted(t for t, info in REGISTRY.items()
                 if info.case is not None and t in gpu.KERNELS and t not in OWN_TESTS)
GRADIENT = [t for t in FORWARD if has_grad_kernel(t)]


def _assert_same(op_type, cpu, cuda, dtype):
    assert len(cpu) == len(cuda), op_type
    for slot, a, b in zip(REGISTRY[op_type].output_names, cpu, cuda):
        if isinstance(a, list):
            assert isinstance(b, list) and len(a) == len(b), f"{op_type}: {slot}"
            pairs = zip(a, b)
        else:
            pairs = [(a, b)]
        for x, y in pairs:
            if x is None:
                assert y is None, f"{op_type}: {slot} is None on the CPU only"
                continue
            assert y.dtype == x.dtype and y.shape == x.shape, \
                f"{op_type}: {slot} is {y.dtype}{y.shape}, on the CPU {x.dtype}{x.shape}"
    difference = max_difference(cpu, cuda)
    assert difference <= TOLERANCE[dtype], f"{op_type}: max relative difference {difference:.3g}"
    for a, b in zip(cpu, cuda):   # integer outputs (masks, ids) exactly
        if isinstance(a, np.ndarray) and a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b, err_msg=op_type)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op_type", FORWARD)
def test_forward_matches_cpu(op_type, dtype):
    for seed in SEEDS:
        inputs, attrs = forward_case(op_type, seed, dtype)
        cpu, cuda = run_both(op_type, inputs, attrs)
        _assert_same(op_type, cpu, cuda, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op_type", GRADIENT)
def test_gradient_matches_cpu(op_type, dtype):
    for seed in SEEDS:
        grad_type, inputs, attrs, wants = grad_case(op_type, seed, dtype)
        cpu, cuda = run_both(grad_type, inputs, attrs, wants)
        _assert_same(grad_type, cpu, cuda, dtype)


def test_save_combine_writes_the_same_file(tmp_path):
    inputs, attrs = forward_case("save_combine", 0, np.float32)
    paths = [str(tmp_path / "cpu.pdiparams"), str(tmp_path / "cuda.pdiparams")]
    kernels = [REGISTRY["save_combine"].kernel(tape.CPUPlace(), tape.dtypes.FP32).fn,
               gpu.KERNELS["save_combine"]]
    for path, kernel in zip(paths, kernels):
        kernel(inputs["X"], path, True, attrs["save_as_fp16"])
    assert open(paths[0], "rb").read() == open(paths[1], "rb").read()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_pool2d_on_2x2_windows_tiling_the_image(pooling_type, dtype):
    """The fast path of the common 2x2 pooling, which random cases seldom draw."""
    x = np.random.default_rng(0).permutation(2 * 3 * 4 * 6).reshape(2, 3, 4, 6) / 10.0
    x[0, 0, :2, :2] = 1.0      # a tie: the first maximum gets the gradient
    attrs = REGISTRY["pool2d"].check_attrs({"pooling_type": pooling_type, "ksize": [2, 2],
                                           "strides": [2, 2]})
    inputs = {"X": x.astype(dtype)}
    cpu, cuda = run_both("pool2d", inputs, attrs)
    _assert_same("pool2d", cpu, cuda, dtype)
    grad_inputs = {"X": inputs["X"], "Out": cpu[0], "Out@GRAD": np.ones_like(cpu[0]) / 3}
    cpu, cuda = run_both("pool2d_grad", grad_inputs, attrs, {"X@GRAD"})
    _assert_same("pool2d_grad", cpu, cuda, dtype)


BAD_INDICES = [(op_type, slot, bad, gradient)
               for op_type, slot, bad in [("softmax_with_cross_entropy", "Label", 7),
                                          ("cross_entropy", "Label", -3),
                                          ("lookup_table_v2", "Ids", 99)]
               for gradient in (False, True)]


@pytest.mark.parametrize("op_type, slot, bad, gradient", BAD_INDICES)
def test_bad_indices_raise_the_cpu_error(op_type, slot, bad, gradient):
    checked = 0
    for seed in SEEDS:
        if gradient:
            op, inputs, attrs, wants = grad_case(op_type, seed, np.float64)
        else:
            (inputs, attrs), op = forward_case(op_type, seed, np.float64), op_type
            wants = set(REGISTRY[op].output_names)
        if attrs.get("soft_label"):
            continue
        inputs[slot] = inputs[slot].copy()
        inputs[slot].reshape(-1)[-1] = bad
        messages = []
        for kernel in (REGISTRY[op].kernel(tape.CPUPlace(), tape.dtypes.FP64),
                       Kernel(gpu.KERNELS[op], REGISTRY[op])):
            with pytest.raises(tape.InvalidArgumentError) as error:
                kernel.call(inputs, attrs, wants)
            messages.append(str(error.value))
        assert messages[0] == messages[1]
        checked += 1
    assert checked
