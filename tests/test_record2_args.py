"""A traced function's lazy recorder (``positional.make_bound``) makes each call's LazyOp
``args`` as a copy of a dict bound for the tape with the captured Variables' arrays, only the
arguments set per call. Each op's dict is its own, and a captured array replaced mid-tape is
the one the calls after it read."""
import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import layers, ops

pytestmark = pytest.mark.usefixtures("unchecked")
RNG = np.random.default_rng(31)


def _recorded_call():
    linear = layers.Linear(3, 3, dtype="float64")
    f = tape.function(lambda x: ops.tanh(linear(x)))
    x = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)
    return linear, f, x


def _op(v):
    return v._lazy[0]


def test_each_call_has_its_own_args_in_slot_order():
    linear, f, x = _recorded_call()
    with tape.lazy():
        tape.reset_global_tape()
        ys = [f(x) for _ in range(4)]
        assert f.recorders      # (the later calls were the recorder's)
        first, second = _op(ys[2]), _op(ys[3])
        assert first.args is not second.args
        assert list(first.args) == [s.name for s in first.plan.info.inputs]
        assert first.args["Arg0"] is x.value()
        assert {first.args[k] is second.args[k] for k in first.args} == {True}
        held = {id(a) for k, a in first.args.items() if k != "Arg0"}
        assert held == {id(linear.w.value()), id(linear.b.value())}
        first.args["Arg0"] = None       # (one op's dict changed: no other op's)
        assert second.args["Arg0"] is x.value() and _op(f(x)).args["Arg0"] is x.value()


def test_a_captured_array_replaced_mid_tape_is_read_by_the_calls_after_it():
    linear, f, x = _recorded_call()
    old = linear.w.value()
    with tape.lazy():
        tape.reset_global_tape()
        before = [f(x) for _ in range(3)]
        linear.w._value = new = old + 1.0
        after = [f(x) for _ in range(3)]
        assert {id(a) for y in before for a in _op(y).args.values()} >= {id(old)}
        for y in after:
            assert any(a is new for a in _op(y).args.values())
            assert not any(a is old for a in _op(y).args.values())
        got = after[-1].numpy()
    tape.reset_global_tape()
    np.testing.assert_array_equal(got, f(x).numpy())
