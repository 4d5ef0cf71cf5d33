"""A traced function's lazy recorder (``positional.make_bound``) makes each call's LazyOp
``args`` as a copy of a dict bound for the tape with the captured Variables' arrays, only the
arguments set per call; a lazy positional runner, as a copy of its optional slots' Nones.
Each op's dict is its own, and a captured array replaced mid-tape is the one the calls after
it read."""
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


def test_a_lazy_positional_ops_args_are_its_own_with_absent_slots_none():
    """A lazy positional runner of an op with optional slots (scale: ScaleTensor, BiasTensor;
    split: AxisTensor, SectionsTensorList) copies a dict of Nones and sets the required
    slots: each op's dict its own, in slot order."""
    x = tape.Variable(RNG.standard_normal((4, 3)), stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        first = ops.scale(x, scale=2.0)
        second = ops.scale(first, scale=3.0)
        parts = ops.split(second, num=2, axis=0)
        ops_made = [_op(first), _op(second), _op(parts[0])]
        for op, read in zip(ops_made, [x.value(), first._lazy, second._lazy]):
            info = op.plan.info
            assert list(op.args) == [s.name for s in info.inputs]
            (required,) = [s.name for s in info.inputs if not s.dispensable]
            assert op.args[required] is read or op.args[required] == read
            assert all(op.args[s.name] is None for s in info.inputs if s.dispensable)
        assert len({id(op.args) for op in ops_made}) == 3
        got = parts[1].numpy()
    np.testing.assert_array_equal(got, (x.numpy() * 2.0 * 3.0)[2:])
