"""The eager hot path without checks: kernels called directly, outputs made by the runner.

The suite runs with FLAGS_enable_unused_var_check on (tests/conftest.py), which sends every
kernel call through ``dispatch.invoke`` and ``checks.run_kernel``. With no check on, an eager op
calls its kernel through ``CallPlan.direct`` and makes its outputs in its runner, and backward
calls grad kernels directly too: here every op with a test case runs forward and backward both
ways, and the values and gradients must agree bit for bit.
"""
import numpy as np
import pytest
from test_ops import CASE_OPS, _run_recorded

import tape
from tape.registry import op_info
from tape.testing import Draw

_CHECKS = ("FLAGS_enable_unused_var_check", "FLAGS_check_nan_inf")


def _unchecked(op_type, inputs, attrs):
    saved = tape.get_flags(list(_CHECKS))
    tape.set_flags(dict.fromkeys(_CHECKS, False))
    try:
        return _run_recorded(op_type, inputs, attrs, tape.Tape())
    finally:
        tape.set_flags(saved)


@pytest.mark.parametrize("op_type", CASE_OPS)
def test_direct_calls_match_checked_calls(op_type):
    inputs, attrs = op_info(op_type).case(Draw.from_seed(0))
    checked = _run_recorded(op_type, inputs, attrs, tape.Tape())
    direct = _unchecked(op_type, inputs, attrs)
    for kind, expected, got in zip(("output", "gradient of"), checked, direct):
        assert expected.keys() == got.keys(), f"{op_type}: {kind} slots differ"
        for slot, arrays in expected.items():
            for a, b in zip(arrays, got[slot], strict=True):
                assert (a is None) == (b is None), f"{op_type}: {kind} {slot}"
                if a is not None:
                    assert a.dtype == b.dtype and a.shape == b.shape, f"{op_type}: {kind} {slot}"
                    np.testing.assert_array_equal(b, a, err_msg=f"{op_type}: unchecked {kind} "
                                                  f"{slot} differs from the checked call")


def test_unchecked_outputs_are_what_make_outputs_makes():
    """The runner's own output making (no ``make_outputs`` call) gives the same Variables:
    shape, dtype, stop_gradient, leaf-ness, place, a fresh name, and no gradient."""
    saved = tape.get_flags(list(_CHECKS))
    tape.set_flags(dict.fromkeys(_CHECKS, False))
    try:
        tape.reset_global_tape()
        x = tape.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), stop_gradient=False)
        c = tape.Variable(np.ones((2, 3), np.float32))
        y = x * 2.0
        z = tape.ops.reshape2(c, shape=[3, 2])
        with tape.no_grad():
            w = x * 3.0
    finally:
        tape.set_flags(saved)
    assert (y.shape, y.dtype, y.stop_gradient, y.is_leaf, y.grad) == ((2, 3), np.float32,
                                                                         False, False, None)
    assert (z.shape, z.stop_gradient) == ((3, 2), True)
    assert (w.stop_gradient, w.is_leaf) == (True, True)
    assert y.place is x.place and y.name != w.name and y.name.startswith("tmp_")
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2, np.float32))
