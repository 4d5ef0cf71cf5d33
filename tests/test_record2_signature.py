"""A runner given no signature writes out ``attr_signature.signature``'s plain form; for one
or two attributes it unpacks them from ``items()``: the same tuple, so a runner's plans are
keyed as every other caller's (``signature(attrs)``), eager and lazy, positional or not."""
import contextlib

import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import ops, runner
from tape.attr_signature import signature
from tape.registry import op_info

pytestmark = pytest.mark.usefixtures("unchecked")


def _calls(x):
    """(op type, attributes, call) of ops called with none, one, two and three attributes,
    through positional runners (split, scale, tanh) and general ones (concat)."""
    return [("tanh", {}, lambda: ops.tanh(x)),
            ("concat", {"axis": 1}, lambda: ops.concat([x, x], axis=1)),
            ("split", {"num": 2, "axis": 0}, lambda: ops.split(x, num=2, axis=0)),
            ("scale", {"scale": 2.5, "bias_after_scale": False},
             lambda: ops.scale(x, scale=2.5, bias_after_scale=False)),
            ("scale", {"scale": 2.5, "bias": 1.5, "bias_after_scale": False},
             lambda: ops.scale(x, scale=2.5, bias=1.5, bias_after_scale=False))]


@pytest.mark.parametrize("lazy", [False, True])
def test_a_runners_signature_is_the_attributes_signature(lazy, monkeypatch):
    """After its first call, each call finds its plan under the runner's own signature: a
    signature other than ``signature(attrs)`` would send every call to ``runner.infer_new``,
    which asks ``signature`` and finds the plan under the right one."""
    x = tape.Variable(np.arange(12, dtype=np.float32).reshape(4, 3), stop_gradient=False)
    asked = []
    monkeypatch.setattr(runner, "signature", lambda attrs: asked.append(attrs) or
                        signature(attrs))
    for op_type, attrs, call in _calls(x):
        with tape.lazy() if lazy else contextlib.nullcontext():
            tape.reset_global_tape()
            call()
            asked.clear()
            for _ in range(3):
                call()
        assert not asked, (op_type, asked)
        sig = signature(attrs)
        assert sig == ((*attrs.items(), *map(type, attrs.values())) if attrs else ())
        assert any(key[0] == sig for key in op_info(op_type).plans), op_type


def test_attributes_equal_by_value_but_not_by_type_are_two_signatures():
    x = tape.Variable(np.arange(12, dtype=np.float32).reshape(4, 3), stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        ops.scale(x, scale=2, bias=1.0)
        ops.scale(x, scale=2.0, bias=1.0)
    keys = [key[0] for key in op_info("scale").plans]
    assert signature({"scale": 2, "bias": 1.0}) in keys
    assert signature({"scale": 2.0, "bias": 1.0}) in keys
