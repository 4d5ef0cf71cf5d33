"""Registering ops: the "add your own op" story, and what the registry and the checker reject."""

import numpy as np
import pytest

import tape
from tape import ops
from tape.attribute import FLOAT, AtLeast, Attr
from tape.ops.rules import float_same_as
from tape.registry import REGISTRY, GradOp, kernel, register_op
from tape.testing import Draw, check_forward, check_grad


def _cube_case(d):
    return {"X": d.floats(d.shape(1, 3), -2.0, 2.0)}, {"scale": float(d.choice((0.5, 1.0, 3.0)))}


def cube_reference(X, scale):
    return scale * X**3


def register_cube(op_type, grad_kernel):
    """``Out = scale * X**3``: proto, shape rule, grad maker and case, then the kernels."""
    register_op(op_type, inputs=["X"], outputs=["Out"],
                attrs=[Attr("scale", FLOAT, 1.0, "factor", check=AtLeast(0.0))],
                infer_shape=float_same_as("X"), grad=GradOp(reads=["X"]), case=_cube_case,
                doc="Out = scale * X^3")

    @kernel(op_type)
    def cube(X, scale):
        return scale * X**3

    kernel(op_type + "_grad")(grad_kernel)


def good_cube_grad(X, dOut, scale):
    return 3 * scale * X * X * dOut


def test_user_op_is_picked_up_and_passes_the_checker(user_ops):
    register_cube("user_cube", good_cube_grad)
    assert REGISTRY["user_cube_grad"].inputs[0].name == "X"
    x = tape.Variable(np.array([1.0, -2.0, 0.5]), stop_gradient=False)
    y = ops.user_cube(x, scale=2.0)
    np.testing.assert_allclose(y.value(), 2 * x.value() ** 3)
    y.backward()
    np.testing.assert_allclose(x.grad.value(), 6 * x.value() ** 2)
    for seed in range(5):
        inputs, attrs = REGISTRY["user_cube"].case(Draw.from_seed(seed))
        for dtype in (np.float64, np.float32):
            check_forward("user_cube", inputs, attrs, cube_reference, dtype)
        check_grad("user_cube", inputs, attrs, seed=seed)


def test_checker_names_a_wrong_gradient(user_ops):
    register_cube("user_cube_wrong", lambda X, dOut, scale: 3 * scale * X * dOut)
    inputs, attrs = REGISTRY["user_cube_wrong"].case(Draw.from_seed(0))
    with pytest.raises(AssertionError, match="user_cube_wrong: gradient of input 'X'.*"
                                             "vector-Jacobian product .* central difference"):
        check_grad("user_cube_wrong", inputs, attrs)


def test_checker_catches_a_float32_gradient_promoted_to_float64(user_ops):
    register_cube("user_cube_f64", lambda X, dOut, scale: good_cube_grad(X, dOut, scale)
                  .astype(np.float64))
    inputs, attrs = REGISTRY["user_cube_f64"].case(Draw.from_seed(0))
    with pytest.raises(AssertionError, match="user_cube_f64: gradient of input 'X' is float64 "
                                             "for float32 inputs"):
        check_grad("user_cube_f64", inputs, attrs)


def test_checker_catches_a_forward_value_and_dtype(user_ops):
    register_cube("user_cube_fwd", good_cube_grad)
    inputs, attrs = {"X": np.array([1.0, 2.0])}, {"scale": 1.0}
    with pytest.raises(AssertionError, match="user_cube_fwd: output 'Out' differs"):
        check_forward("user_cube_fwd", inputs, attrs, lambda X, scale: X**3 + 1e-6, np.float64)
    with pytest.raises(AssertionError, match="user_cube_fwd: output 'Out' is float32, the "
                                             "reference gives float64"):
        check_forward("user_cube_fwd", inputs, attrs,
                      lambda X, scale: X.astype(np.float64) ** 3, np.float32)


def test_checker_catches_a_kernel_that_modifies_its_input(user_ops):
    register_op("user_inplace", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"))

    @kernel("user_inplace")
    def double_in_place(X):
        X *= 2
        return X

    with pytest.raises(AssertionError, match="user_inplace: the kernel modified its input 'X'"):
        check_forward("user_inplace", {"X": np.ones(3)}, {}, lambda X: 2 * X, np.float64)


def test_checker_catches_a_shape_rule_that_disagrees_with_the_kernel(user_ops):
    register_op("user_badshape", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"))
    kernel("user_badshape")(lambda X: X.sum(axis=0))
    with pytest.raises(AssertionError, match=r"user_badshape: output 'Out' is float64 \(3,\) "
                                             r"but its shape rule declared float64 \(2, 3\)"):
        check_forward("user_badshape", {"X": np.ones((2, 3))}, {}, lambda X: X.sum(0), np.float64)


def test_kernel_parameter_that_names_nothing_is_an_error(user_ops):
    register_op("user_misnamed", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"))
    with pytest.raises(tape.NotFoundError, match="parameter 'alpha'.*names no input slot"):
        kernel("user_misnamed")(lambda X, alpha: X * alpha)   # caught at registration


def test_registering_a_type_twice_is_an_error(user_ops):
    register_op("user_twice", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"))
    with pytest.raises(tape.InvalidArgumentError, match="'user_twice' is already registered"):
        register_op("user_twice", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"))


def test_grad_reading_an_unknown_slot_is_an_error(user_ops):
    with pytest.raises(tape.NotFoundError, match="user_unknown_read: grad reads unknown slot"):
        register_op("user_unknown_read", inputs=["X"], outputs=["Out"],
                    infer_shape=float_same_as("X"), grad=GradOp(reads=["Z"]))
