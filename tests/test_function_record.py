"""A tape.function call on a lazy tape, recorded by its trace's lazy recorder
(``positional.make_bound``): the arguments checked against the trace's signature, the
captured parameters bound once per tape and again when one changes; and a recurrent cell's
own checks, made once per signature (``tape.function``'s ``check``).

The recorder serves only with the checks off (the suite runs with the unused-input check on,
which sends every call to the general runner): these tests turn them off, as users and
benchmarks run, and compare with eager, or with the same calls recorded without the
recorder."""
import contextlib
import importlib

import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import layers, ops
from tape.errors import InvalidArgumentError, PreconditionNotMetError
from tape.tape import LazyTape

pytestmark = pytest.mark.usefixtures("unchecked", "user_ops")
RNG = np.random.default_rng(12)
INPUT, HIDDEN = 5, 6


def _xs(steps: int, batch: int = 1, size: int = INPUT) -> list:
    return [tape.Variable(RNG.standard_normal((batch, size)), stop_gradient=False)
            for _ in range(steps)]


def _counted_runners(monkeypatch, function) -> list:
    """The op types that ``function``'s traces' positional runners and the general lazy
    runner record from now on: what the recorders leave to them."""
    calls = []
    function_module = importlib.import_module("tape.function")
    runner = function_module._Trace.runner

    def counted_runner(trace, tape_class):
        run = runner(trace, tape_class)

        def counted(*args):
            calls.append(trace.info.type)
            return run(*args)
        return counted
    for trace in function.traces.values():
        trace.runners.clear()
    monkeypatch.setattr(function_module._Trace, "runner", counted_runner)
    monkeypatch.setattr(LazyTape, "run", lambda t, info, *args: (
        calls.append(info.type), tape.tape.lazy_runner(info)(t, *args))[1])
    return calls


def _sequence(cell, xs: list, lazy: bool, between=None) -> tuple:
    """``cell`` over ``xs`` from a zero state on one tape; ``between(step)`` runs before each
    step's call. The last h and the gradients of the parameters and the inputs for its sum."""
    for p in (*cell.params(), *xs):
        p.grad = None
    tape.reset_global_tape()
    state = None
    with tape.lazy() if lazy else contextlib.nullcontext():
        for step, x in enumerate(xs):
            if between is not None:
                between(step)
            state = cell(x, state)
        h = state[0] if isinstance(state, tuple) else state
        ops.reduce_sum(h, reduce_all=True).backward()
        h = h.numpy()
    grads = [None if v.grad is None else v.grad.numpy() for v in (*cell.params(), *xs)]
    return h, grads


def _assert_same(got: tuple, want: tuple) -> None:
    np.testing.assert_array_equal(got[0], want[0])
    for g, w in zip(got[1], want[1], strict=True):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("kind", [layers.LSTMCell, layers.GRUCell, layers.SimpleRNNCell])
def test_a_cell_records_its_calls_through_the_recorder_with_eager_results(kind, monkeypatch):
    """After a call per signature (the zero state's, then the state's), every call is
    recorded by the recorder: no runner records one; forward and gradients bit for bit
    eager's (one sequence: the traced ops run as eager's do)."""
    tape.seed(3)
    cell = kind(INPUT, HIDDEN, dtype="float64")
    xs = _xs(12)
    eager = _sequence(cell, xs, lazy=False)
    _sequence(cell, xs, lazy=True)      # (traces, plans)
    calls = _counted_runners(monkeypatch, cell._traced.function)
    lazy = _sequence(cell, xs, lazy=True)
    assert not [c for c in calls if c.startswith("function_")], calls
    _assert_same(lazy, eager)


def test_the_recorder_records_what_the_positional_runner_records():
    """The same calls with the recorders and with them refused (the trace's positional runner
    records them): the same op types, handle entries and plans, and the same values."""
    tape.seed(4)
    cell = layers.LSTMCell(INPUT, HIDDEN, dtype="float64")
    xs = _xs(6)

    def recorded(refuse: bool):
        tape.reset_global_tape()
        with tape.lazy():
            state = cell(xs[0])
            traces = list(cell._traced.function.traces.values())
            for trace in traces:
                if refuse:
                    trace.record = None
            cell._traced.function.recorders.clear()
            for x in xs[1:]:
                state = cell(x, state)
            t = tape.get_global_tape()
            handles = [(h.type, h.plan, [type(e).__name__ for e in h.entries]) for h in t]
            values = [v.numpy() for v in state]
        return handles, values
    (with_recorder, values), (without, expected) = recorded(False), recorded(True)
    assert with_recorder == without
    for got, want in zip(values, expected, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", ["x size", "h size", "c batch"])
def test_a_wrong_shape_after_many_good_calls_raises_the_cells_error_at_the_call(bad):
    cell = layers.LSTMCell(INPUT, HIDDEN)
    x = tape.Variable(RNG.standard_normal((1, INPUT)).astype(np.float32))
    with tape.lazy():
        tape.reset_global_tape()
        state = cell(x)
        for _ in range(20):
            state = cell(x, state)
        h, c = state
        wrong = {"x size": (tape.Variable(np.ones((1, INPUT + 2), np.float32)), (h, c)),
                 "h size": (x, (tape.Variable(np.ones((1, HIDDEN + 1), np.float32)), c)),
                 "c batch": (x, (h, tape.Variable(np.ones((2, HIDDEN), np.float32))))}[bad]
        message = {"x size": rf"LSTMCell: expected x of shape \(batch, {INPUT}\), received "
                             rf"\(1, {INPUT + 2}\)",
                   "h size": rf"LSTMCell: expected h of shape \(1, {HIDDEN}\), received "
                             rf"\(1, {HIDDEN + 1}\)",
                   "c batch": rf"LSTMCell: expected c of shape \(1, {HIDDEN}\), received "
                              rf"\(2, {HIDDEN}\)"}[bad]
        with pytest.raises(InvalidArgumentError, match=message):
            cell(*wrong)
        cell(x, state)      # (and the good signature still records)


def test_the_check_runs_once_per_signature_and_on_every_inlined_call():
    checked = []
    f = tape.function(lambda x: ops.tanh(x) * 2.0, check=lambda x: checked.append(x.shape))
    x, y = tape.Variable(np.ones((2, 3))), tape.Variable(np.ones((4, 3)))
    with tape.lazy():
        tape.reset_global_tape()
        for v in (x, x, y, x, y, y):
            f(v)
    assert checked == [(2, 3), (4, 3)]
    del checked[:]
    tape.static.trace(lambda v: f(f(v)), x)
    assert checked == [(2, 3), (2, 3)]


def test_a_parameter_array_replaced_mid_tape_is_the_one_recorded_after(monkeypatch):
    """An eager write between two lazy calls on one tape (a new array, same shape): the
    recorder binds it, so the calls after it read the new value: forward as eager's, and
    gradients as the positional runner's. (Eager backward reads the new value for the calls
    before it too, a lazy op the array it was given: they differ there.)"""
    tape.seed(5)
    cell = layers.GRUCell(INPUT, HIDDEN, dtype="float64")
    xs = _xs(8)

    def rescaled(step):
        if step == 5:
            with tape.no_grad():
                t = tape.get_global_tape()
                lazy = type(t) is LazyTape
                if lazy:
                    t.__class__ = tape.Tape     # (an eager op on the same tape)
                t.add_op("scale", {"X": [cell.weight_hh]}, {"Out": [cell.weight_hh]},
                         {"scale": 0.5})
                if lazy:
                    t.__class__ = LazyTape

    def run(lazy: bool):
        weights = [p.value().copy() for p in cell.params()]
        result = _sequence(cell, xs, lazy, between=rescaled)
        for p, w in zip(cell.params(), weights):
            p.value()[...] = w
        return result
    _sequence(cell, xs, lazy=True)      # (traces, plans)
    got, eager = run(lazy=True), run(lazy=False)
    np.testing.assert_array_equal(got[0], eager[0])
    _without_recorders(monkeypatch, cell)
    _assert_same(got, run(lazy=True))


def _without_recorders(monkeypatch, cell) -> None:
    """From now on, ``cell``'s traces (made again) have no recorder: the positional runner
    records its calls."""
    monkeypatch.setattr(importlib.import_module("tape.function"), "make_bound",
                        lambda *args: None)
    cell._traced = None


def test_a_parameter_frozen_or_replaced_mid_tape_is_seen_by_the_calls_after():
    tape.seed(6)
    cell = layers.LSTMCell(INPUT, HIDDEN, dtype="float64")
    other = layers.LSTMCell(INPUT, HIDDEN, dtype="float64").weight_ih
    original = cell.weight_ih
    xs = _xs(8)

    def changed(step):
        if step == 3:
            cell.bias_hh.stop_gradient = True
        if step == 5:
            cell.weight_ih = other

    def reset():
        cell.bias_hh.stop_gradient = False
        cell.weight_ih = original
        other.grad = None
    _sequence(cell, xs, lazy=True)      # (traces, plans)
    reset()
    got = _sequence(cell, xs, lazy=True, between=changed)
    reset()
    want = _sequence(cell, xs, lazy=False, between=changed)
    _assert_same(got, want)


def test_calls_on_several_signatures_and_numbers_of_arguments_record_each_its_own():
    f = tape.function(lambda *vs: ops.sum([ops.tanh(v) for v in vs]))
    a, b = tape.Variable(RNG.standard_normal((2, 3))), tape.Variable(RNG.standard_normal((4, 3)))
    calls = [(a,), (b,), (a, a), (a,), (b, b), (b,), (a, a), (a,)]
    with tape.lazy():
        tape.reset_global_tape()
        results = [f(*args) for args in calls]
        values = [r.numpy() for r in results]
    for args, got in zip(calls, values):
        np.testing.assert_array_equal(got, sum(np.tanh(v.numpy()) for v in args))
    assert sorted(f.recorders) == [1, 2]


def test_a_stale_argument_after_many_good_calls_is_refused_at_the_call():
    linear = layers.Linear(3, 3, dtype="float64")
    f = tape.function(lambda x: ops.tanh(linear(x)))
    x = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        old = f(x)
        tape.reset_global_tape()
        y = x
        for _ in range(10):
            y = f(y)
        with pytest.raises(PreconditionNotMetError, match=r"input 'Arg0' \(\w+\) was computed "
                                                          "on a tape that has since been reset"):
            f(old)


def test_captured_parameters_frozen_mid_tape_make_the_calls_after_want_no_gradient():
    """The recorder bound a plan whose outputs want gradients: once every input wants none,
    the calls after record outputs that want none, as eager's ops do."""
    linear = layers.Linear(3, 3, dtype="float64")
    f = tape.function(lambda x: ops.tanh(linear(x)))
    x = tape.Variable(RNG.standard_normal((2, 3)))
    with tape.lazy():
        tape.reset_global_tape()
        wanted = [f(x).stop_gradient for _ in range(5)]
        for p in linear.params():
            p.stop_gradient = True
        after = [f(x).stop_gradient for _ in range(3)]
    assert wanted == [False] * 5 and after == [True] * 3


def test_a_parameter_of_another_shape_mid_tape_is_refused_at_the_call():
    """An eager write that gives a captured parameter another shape between two lazy calls:
    the recorder's plan no longer holds, and the call raises the traced op's error."""
    linear = layers.Linear(3, 3, dtype="float64")
    f = tape.function(lambda x: ops.tanh(linear(x)))
    x = tape.Variable(RNG.standard_normal((2, 3)))
    with tape.lazy():
        t = tape.reset_global_tape()
        for _ in range(5):
            f(x)
        t.__class__ = tape.Tape     # (an eager op on the same tape)
        with tape.no_grad():
            t.add_op("fill_constant", {}, {"Out": [linear.w]},
                     {"shape": [4, 3], "dtype": linear.w.desc.dtype, "value": 1.0})
        t.__class__ = LazyTape
        with pytest.raises(InvalidArgumentError, match=r"mul: X flattened to \(2, 3\) but Y "
                           r"flattened to \(4, 3\)"):
            f(x)
