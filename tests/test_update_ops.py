"""The optimizer update ops themselves: their shape rules reject bad inputs before any kernel
runs, and sgd updates a parameter (and a float16 master copy) in place, bit for bit."""
import numpy as np
import pytest

import tape
from tape.testing import run_op


def _adam_inputs(**changes):
    inputs = {"Param": np.ones((2, 3)), "Grad": np.ones((2, 3)), "LearningRate": np.ones(1),
              "Moment1": np.zeros((2, 3)), "Moment2": np.zeros((2, 3)),
              "Beta1Pow": np.full(1, 0.9), "Beta2Pow": np.full(1, 0.999)}
    return {**inputs, **changes}


@pytest.mark.parametrize("op, inputs, attrs, message", [
    ("momentum", {"Param": np.ones((2, 3)), "Grad": np.ones((2, 3)), "Velocity": np.ones(3),
                  "LearningRate": np.ones(1)}, {"mu": 0.9},
     r"momentum: Velocity \(3,\) must have the shape of Param \(2, 3\)"),
    ("momentum", {"Param": np.ones(3), "Grad": np.ones(3), "Velocity": np.ones(3),
                  "LearningRate": np.ones(1)}, {"use_nesterov": True},
     r"momentum: attribute\(s\) \['mu'\] have no default"),
    ("adam", _adam_inputs(Moment2=np.zeros((2, 3), np.float32)), {},
     "adam: Moment2 .* must be float64 .*Param.*, received float32"),
    ("adam", _adam_inputs(LearningRate=np.ones(2)), {},
     r"adam: LearningRate must hold one element, received shape \(2,\)"),
    ("adam", _adam_inputs(Beta2Pow=np.ones((1, 2))), {},
     r"adam: Beta2Pow must hold one element, received shape \(1, 2\)"),
    ("adam", _adam_inputs(Moment2Max=np.zeros((2, 3))), {},
     "adam: Moment2Max must be given exactly when amsgrad is true, received amsgrad=False "
     "with Moment2Max given"),
    ("adamw", _adam_inputs(), {"amsgrad": True}, "adamw: Moment2Max .* amsgrad=True with "
     "Moment2Max missing"),
    ("adam", _adam_inputs(MasterParam=np.ones((2, 3))), {},
     "adam: MasterParam must be given exactly when multi_precision is true"),
    ("adam", _adam_inputs(SkipUpdate=np.ones(1)), {},
     "adam: input SkipUpdate .* must be bool, received float64"),
    ("adamw", _adam_inputs(Grad=np.ones((3, 2))), {},
     r"adamw: Grad \(3, 2\) must have the shape of Param \(2, 3\)")])
def test_update_ops_reject_bad_inputs_before_any_kernel(op, inputs, attrs, message,
                                                        forbid_kernels):
    forbid_kernels(op)
    with pytest.raises(tape.InvalidArgumentError, match=message):
        run_op(op, inputs, attrs)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "grad transposed"])
@pytest.mark.parametrize("size", [(3, 4), (80, 64)])     # numpy's path, and numba's (>= 4096)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd_updates_the_parameter_in_place_bit_for_bit(dtype, size, layout):
    rng = np.random.default_rng(1)
    param = rng.standard_normal(size).astype(dtype)
    grad = rng.standard_normal(size).astype(dtype)
    if layout == "transposed":
        param, grad = param.T, grad.T
    elif layout == "grad transposed":
        grad = np.ascontiguousarray(grad.T).T
    lr = np.array([0.1], np.float32)
    expected = param - dtype(lr.item()) * grad
    out = run_op("sgd", {"Param": param, "LearningRate": lr, "Grad": grad})["ParamOut"][0]
    np.testing.assert_array_equal(out.value(), expected)


def test_sgd_on_a_float16_master_param_updates_both():
    rng = np.random.default_rng(2)
    master = rng.standard_normal(8).astype(np.float32)
    grad = rng.standard_normal(8).astype(np.float16)
    lr = np.array([0.5], np.float32)
    expected = master - np.float32(0.5) * grad.astype(np.float32)
    outs = run_op("sgd", {"Param": master.astype(np.float16), "LearningRate": lr, "Grad": grad,
                          "MasterParam": master}, {"multi_precision": True})
    np.testing.assert_array_equal(outs["MasterParamOut"][0].value(), expected)
    np.testing.assert_array_equal(outs["ParamOut"][0].value(), expected.astype(np.float16))
