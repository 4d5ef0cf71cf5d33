"""The ``scale`` kernel computes Paddle's formula bit for bit, signed zeros included, and the
number operators built on it keep IEEE's results.

Paddle's scale is ``scale * X + bias`` (``bias_after_scale``) or ``scale * (X + bias)``, with
both attributes cast to X's dtype first; a +0.0 bias turns a -0.0 product into +0.0. The
operators ``x * c``, ``x / c`` and ``-x`` record a -0.0 bias, which adds nothing to any value,
so they give IEEE's product, as numpy does.

Every case runs with the checks on (the suite's setting: the kernel function itself runs) and
off (the eager path then calls the plan's own call, ``scale.with_attrs``, where one applies).
"""
import math

import numpy as np
import pytest
from paddle_ops import needs_paddle, paddle_op_results

import tape
from tape import ops

SPECIALS = [-0.0, 0.0, 1.0, -1.0, 1e-45, -1e-45, 3.0e38, np.inf, -np.inf, np.nan, 2.5, -7.25]
# (scale, bias, bias_after_scale): zeros of both signs for each attribute, and ordinary values
ATTRS = [(s, b, after) for s in (1.0, -1.0, 0.0, -0.0, 1.5, 1e-30) for b in (0.0, -0.0, 0.25)
         for after in (True, False)]


@pytest.fixture(params=["checks on", "checks off"])
def checks(request, restore_flags):
    if request.param == "checks off":
        tape.set_flags({"FLAGS_enable_unused_var_check": False, "FLAGS_check_nan_inf": False})
    return request.param


def _paddle_formula(x, scale, bias, bias_after_scale):
    """What Paddle's CPU scale kernel computes, in x's dtype."""
    s, b = x.dtype.type(scale), x.dtype.type(bias)
    with np.errstate(all="ignore"):
        return s * x + b if bias_after_scale else s * (x + b)


def _bits(a):
    """The values as their bit patterns (NaNs of any payload as one), for exact comparison."""
    a = np.asarray(a)
    a = np.where(np.isnan(a), a.dtype.type(np.nan), a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64).tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scale, bias, bias_after_scale", ATTRS)
def test_scale_is_paddles_formula_bit_for_bit(checks, dtype, scale, bias, bias_after_scale):
    rng = np.random.default_rng(0)
    x = np.concatenate([np.asarray(SPECIALS, dtype), rng.standard_normal(20).astype(dtype)])
    with np.errstate(all="ignore"):
        got = ops.scale(tape.Variable(x), scale=scale, bias=bias,
                        bias_after_scale=bias_after_scale).value()
    assert got.dtype == dtype
    assert _bits(got) == _bits(_paddle_formula(x, scale, bias, bias_after_scale))


def test_adding_a_zero_to_a_negative_zero_gives_a_positive_zero(checks, mode):
    x = tape.Variable(np.array([-0.0, 0.0, -1.0], np.float32))
    assert np.signbit((x + 0.0).value()).tolist() == [False, False, True]
    assert np.signbit((0.0 + x).value()).tolist() == [False, False, True]
    assert np.signbit(ops.scale(x, scale=1.0, bias=0.0).value()).tolist() == [False, False, True]
    assert np.signbit(ops.scale(x, scale=-1.0).value()).tolist() == [False, False, False]


@pytest.mark.parametrize("c", [1.5, -1.5, 1.0, -1.0, 0.0, -0.0, 1e-30, np.inf])
def test_number_operators_give_ieee_results(checks, mode, c):
    values = np.array(SPECIALS, np.float32)
    x = tape.Variable(values)
    with np.errstate(all="ignore"):
        expected = {"x * c": values * np.float32(c), "c * x": np.float32(c) * values,
                    "x + c": values + np.float32(c), "x - c": values - np.float32(c),
                    "c - x": np.float32(c) - values, "-x": -values}
        got = {"x * c": x * c, "c * x": c * x, "x + c": x + c, "x - c": x - c, "c - x": c - x,
               "-x": -x}
        if c != 0 and not math.isinf(1.0 / c):
            expected["x / c"], got["x / c"] = values * np.float32(1.0 / c), x / c
        got = {k: v.value() for k, v in got.items()}
    for name in expected:
        assert _bits(got[name]) == _bits(expected[name]), name


def test_the_gradient_of_a_product_by_a_number_is_that_number(checks):
    x = tape.Variable(np.array([1.0, -2.0], np.float32), stop_gradient=False)
    for c in (2.0, -0.5):
        tape.reset_global_tape()
        x.grad = None
        ops.reduce_sum(x * c, reduce_all=True).backward()
        assert _bits(x.grad.value()) == _bits(np.full(2, c, np.float32))


@needs_paddle
def test_paddle_gives_the_same_signed_zeros(tmp_path):
    x = np.array(SPECIALS, np.float32)
    cases = {f"{i}": ("scale", {"X": x}, ["Out"],
                      {"scale": s, "bias": b, "bias_after_scale": after}, [], None)
             for i, (s, b, after) in enumerate(ATTRS)}
    paddle = paddle_op_results(tmp_path, cases)
    for i, (s, b, after) in enumerate(ATTRS):
        with np.errstate(all="ignore"):
            got = ops.scale(tape.Variable(x), scale=s, bias=b, bias_after_scale=after).value()
        assert _bits(got) == _bits(paddle[f"{i}"]["Out"]), (s, b, after)
