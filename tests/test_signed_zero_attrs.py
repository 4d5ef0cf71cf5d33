"""Float attributes that equality cannot tell apart: -0.0 == 0.0 and nan != nan.

CallPlans, checked attributes, grad steps and the ``x * float`` fast path are all cached by
attribute equality; a zero must keep its sign through every one of them, in either order, and
a NaN attribute must find its plan again instead of adding one per call.
"""
import math

import numpy as np
import pytest

import tape
from tape.attr_signature import is_exact, signature
from tape.registry import op_info


def _signs(v) -> list:
    return np.signbit(v.numpy()).tolist()


def _ones():
    return tape.Variable(np.ones(3, np.float32), stop_gradient=False)


@pytest.mark.parametrize("first", [0.0, -0.0])
def test_multiplying_by_a_zero_keeps_its_sign_after_the_other_zero(mode, first):
    x = _ones()
    for zero in (first, -first, first):
        assert _signs(x * zero) == [math.copysign(1.0, zero) < 0] * 3
        assert _signs(zero * x) == [math.copysign(1.0, zero) < 0] * 3


def test_dividing_by_infinities_gives_zeros_of_their_signs(mode):
    x = _ones()
    assert _signs(x / math.inf) == [False] * 3
    assert _signs(x / -math.inf) == [True] * 3
    assert _signs(x / math.inf) == [False] * 3


@pytest.mark.parametrize("zero", [0.0, -0.0, np.float64(0.0), np.float64(-0.0)])
def test_the_general_operators_keep_a_zeros_sign(mode, zero):
    x = _ones()
    x * (-zero)
    negative = math.copysign(1.0, zero) < 0
    assert _signs(x * zero) == [negative] * 3


def test_an_ops_float_attribute_keeps_its_sign_through_the_runner(mode):
    x = _ones()
    for scale in (0.0, -0.0, 0.0, -0.0):
        # (a -0.0 bias adds nothing; Paddle's default +0.0 would turn the -0.0 into +0.0)
        out = tape.ops.scale(x, scale=scale, bias=-0.0)
        assert _signs(out) == [math.copysign(1.0, scale) < 0] * 3
    for value in (-0.0, 0.0, -0.0):
        filled = tape.ops.fill_constant(shape=[2], value=value, dtype=5)
        assert _signs(filled) == [math.copysign(1.0, value) < 0] * 2


def test_a_zero_bias_keeps_its_sign_in_the_recorded_plan():
    tape.reset_global_tape()
    x = _ones()
    biases = []
    for bias in (0.0, -0.0, -0.0, 0.0):
        x + bias
        biases.append(math.copysign(1.0, tape.get_global_tape()._ops[-1].plan.attrs["bias"]))
    x - 0.0     # bias -0.0
    biases.append(math.copysign(1.0, tape.get_global_tape()._ops[-1].plan.attrs["bias"]))
    assert biases == [1.0, -1.0, -1.0, 1.0, -1.0]


def test_the_gradient_of_a_zero_scale_keeps_its_sign():
    x = _ones()
    for zero in (0.0, -0.0, 0.0):
        tape.reset_global_tape()
        x.grad = None
        (x * zero).sum().backward()
        assert np.signbit(x.grad.numpy()).tolist() == [math.copysign(1.0, zero) < 0] * 3


def test_checked_attributes_keep_a_zeros_sign():
    info = op_info("scale")
    for scale in (0.0, -0.0, 0.0):
        attrs, key = info.checked_attrs({"scale": scale})
        assert math.copysign(1.0, attrs["scale"]) == math.copysign(1.0, scale)
    assert info.checked_attrs({"scale": 0.0})[1] != info.checked_attrs({"scale": -0.0})[1]


def test_a_nan_attribute_finds_its_plan_again(mode):
    x = _ones()
    info = op_info("scale")
    tape.ops.scale(x, scale=float("nan"))
    x * float("nan")
    plans, checked = len(info.plans), len(info.attr_cache)
    for _ in range(20):
        assert np.isnan(tape.ops.scale(x, scale=float("nan")).numpy()).all()
        assert np.isnan((x * float("nan")).numpy()).all()
    assert (len(info.plans), len(info.attr_cache)) == (plans, checked)


def test_signatures_are_exact_only_for_zeros_and_nans():
    assert not is_exact(signature({"a": 1.0, "b": [1.0, 2.0], "c": 0}))
    for attrs in ({"a": 0.0}, {"a": float("nan")}, {"b": [1.0, -0.0]}, {"a": np.float32(0)}):
        sig = signature(attrs)
        assert is_exact(sig)
        hash(sig)
        assert sig == signature(dict(attrs))
    # a fresh NaN is the same value: one shared NaN stands in for every NaN
    assert signature({"a": float("nan")}) == signature({"a": float("nan")})
    assert signature({"a": 0.0, "b": -0.0}) != signature({"a": -0.0, "b": 0.0})
    assert signature({"a": 0.0}) != signature({"a": -0.0})
    # an exact signature never equals a plain one, whatever the values
    assert signature({"a": 0.0}) != (("a", 0.0), float)
