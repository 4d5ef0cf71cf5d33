"""Lazy positional runners (``tape.positional`` with lazy=True): the commonest call on a lazy
tape, ``tape.ops.<type>(x, ...)`` and the operators, recorded without the general lazy
runner's dicts; every other call handed to the general lazy runner before any work.

The suite runs with the unused-input check on, which sends every call to the general runner;
these tests turn the checks off (as users and benchmarks run) so that the lean path runs, and
compare it with the eager positional path and with the general lazy runner.
"""
import numpy as np
import pytest
from test_positional import (  # noqa: F401  (unchecked: the fixture every test here uses)
    POSITIONAL_CASES,
    _describe,
    _served_positionally,
    _variables,
    unchecked,
)

import tape
from tape.errors import InvalidArgumentError, PreconditionNotMetError
from tape.positional import positional_slots
from tape.registry import op_info
from tape.tape import LazyTape, using_tape

_CHECKS = ("FLAGS_enable_unused_var_check", "FLAGS_check_nan_inf")
pytestmark = pytest.mark.usefixtures("unchecked")


@pytest.fixture
def general_lazy_calls(monkeypatch):
    """``watch(info)``: from then on, each call of the op's general lazy runner is counted in
    the list it returns."""
    def watch(info):
        calls = []
        general = tape.tape.lazy_runner(info)

        def counted(*args):
            calls.append(info.type)
            return general(*args)
        monkeypatch.setattr(info, "lazy_runner", counted)
        return calls
    return watch


def _returned_list(info, returned) -> list:
    visible = [s for s in info.outputs if not s.intermediate]
    return list(returned) if len(visible) > 1 else [returned]


def _flat(info, returned) -> list:
    """The Variables among an op function's visible outputs, in order."""
    out = []
    for slot, got in zip([s for s in info.outputs if not s.intermediate],
                         _returned_list(info, returned)):
        out += (got or []) if slot.duplicable else [got] if got is not None else []
    return out


@pytest.mark.parametrize("op_type", POSITIONAL_CASES)
def test_a_lazy_positional_call_records_what_an_eager_one_does(op_type, general_lazy_calls):
    """The same op on the same leaves, eagerly and lazily (its plan known): the lazy call is
    served positionally when the eager one is, makes the same Variables (pending), records
    the same handle entries, and computes the same values bit for bit."""
    info = op_info(op_type)
    inputs, attrs = _served_positionally(op_type)
    xs = _variables(info, inputs)
    eager_tape, lazy_tape = tape.Tape(), LazyTape()
    with using_tape(eager_tape):
        tape.seed(0)
        eager = _flat(info, getattr(tape.ops, op_type)(*xs, **attrs))
    traced = tape.Tape(tracing=True)    # (records every op: its handle shows the plan)
    with using_tape(traced):
        tape.seed(0)
        getattr(tape.ops, op_type)(*xs, **attrs)
    plan = traced._ops[0].plan
    calls = general_lazy_calls(info)
    with using_tape(lazy_tape):
        tape.seed(0)
        lazy = _flat(info, getattr(tape.ops, op_type)(*xs, **attrs))
    assert calls == ([] if plan.made_whole is not None else [op_type])
    assert len(lazy) == len(eager)
    for g, w in zip(lazy, eager):
        assert (g.shape, g.dtype, g.stop_gradient, g.is_leaf, g.grad, g.place) == \
               (w.shape, w.dtype, w.stop_gradient, w.is_leaf, w.grad, w.place), op_type
    assert len(lazy_tape) == len(eager_tape)
    if len(eager_tape):
        e, z = eager_tape._ops[0], lazy_tape._ops[0]
        assert z.plan is e.plan
        n = len(xs)
        assert _describe(z.entries[:n], xs) == _describe(e.entries[:n], xs)
        for a, b in zip(z.entries[n:], e.entries[n:], strict=True):
            assert type(a) is type(b), op_type
        assert {s: len(v) for s, v in z.inputs.items()} == \
               {s: len(v) for s, v in e.inputs.items()}
        assert {s: len(v) for s, v in z.outputs.items()} == \
               {s: len(v) for s, v in e.outputs.items()}
    with using_tape(lazy_tape):
        tape.seed(0)
        tape.compute(*lazy)
    for g, w in zip(lazy, eager):
        assert not g.pending
        if w.value() is not None:
            np.testing.assert_array_equal(g.value(), w.value(), err_msg=op_type)
            assert g.value().dtype == w.value().dtype


def _cell(x, h, c, w, b, table, ids):
    """A Tree-LSTM-like step of the ops a lazy forest records: lookup_table_v2, concat, mul,
    elementwise_add, split (a list output), sigmoid, tanh, elementwise_mul, the operators."""
    e = tape.ops.lookup_table_v2(ids, table)
    gates = tape.ops.mul(tape.ops.concat([x + e, h], axis=1), w) + b
    i, f, o, u = tape.ops.split(gates, num=4, axis=1)
    c = tape.ops.sigmoid(i) * tape.ops.tanh(u) + tape.ops.sigmoid(f) * c
    return tape.ops.sigmoid(o) * tape.ops.tanh(c) * 0.5 + 0.25, c


def _recorded_graph(t, loss) -> tuple:
    """What ``tape.lazy_replay`` keys and walks a backward of ``loss`` by: the CallPlan of each
    handle on tape ``t``, and from ``loss`` on, each op's record position and, per input,
    ``(position, output, index)`` of the op it waits for or the kind of value it was given."""
    ops, stack = {}, [loss._lazy[0]]
    while stack:
        op = stack.pop()
        assert op.record[0] is t.deferred
        inputs = []
        for slot, a in op.args.items():
            for x in a if type(a) is list else [a]:
                if type(x) is tuple:
                    inputs.append((slot, x[0].record[1], x[1], x[2]))
                    stack.append(x[0])
                else:
                    inputs.append((slot, type(x).__name__))
        ops[op.record[1]] = inputs
    return [h.plan for h in t._ops], loss._lazy[0].record[1], sorted(ops.items())


def _cell_step(checked: bool):
    """``(loss, gradients, the recorded graph)`` of three cells run lazily, with the checks
    on (every call through the general lazy runner) or off (the positional ones)."""
    rng = np.random.default_rng(5)
    params = [tape.Variable(rng.standard_normal(s).astype(np.float32), stop_gradient=False)
              for s in ((1, 4), (1, 4), (1, 4), (8, 16), (1, 16), (6, 4))]
    x, h, c, w, b, table = params
    ids = tape.Variable(np.array([2], np.int64))
    saved = tape.get_flags(list(_CHECKS))
    tape.set_flags({"FLAGS_enable_unused_var_check": checked, "FLAGS_check_nan_inf": False})
    try:
        with tape.lazy():
            t = tape.reset_global_tape()
            for _ in range(3):
                h, c = _cell(x, h, c, w, b, table, ids)
            loss = tape.ops.reduce_sum(h, reduce_all=True)
            assert loss.pending
            graph = _recorded_graph(t, loss)
            loss.backward()
    finally:
        tape.set_flags(saved)
    return loss.numpy(), [p.grad.numpy() for p in params], graph


def test_a_lazy_step_by_positional_runners_equals_one_by_the_general_runner():
    """Loss and gradients bit for bit, and the same recorded graph (what ``tape.lazy_replay``
    caches a backward under), whichever runner recorded the ops."""
    general = _cell_step(checked=True)
    positional = _cell_step(checked=False)
    np.testing.assert_array_equal(positional[0], general[0])
    for got, want in zip(positional[1], general[1], strict=True):
        np.testing.assert_array_equal(got, want)
    assert positional[2] == general[2]
    assert len(positional[2][0]) > 40 and any(len(ins) > 1 for _, ins in positional[2][2])


def test_pending_inputs_are_read_by_ref_and_ran_ones_by_value(general_lazy_calls):
    x = tape.Variable(np.arange(4, dtype=np.float32), stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        y = tape.ops.tanh(x)     # (the plans made)
        y = tape.ops.tanh(x * 2.0)
        calls = general_lazy_calls(op_info("tanh"))
        z = tape.ops.tanh(y)     # y pending: z's op reads its ref
        assert calls == [] and z._lazy[0].args["X"] == y._lazy
        z.value()                # y's op ran, y not read: the general runner reads its value
        assert y._value is None and y._lazy[0].results is not None
        w = tape.ops.tanh(y)
        assert calls == ["tanh"] and w._lazy[0].args["X"] is y._value is not None
        v = tape.ops.tanh(y)     # (now y holds its value: positionally, as an eager input)
        assert calls == ["tanh"] and v._lazy[0].args["X"] is y._value
    expected = np.tanh(np.tanh(np.arange(4, dtype=np.float32) * np.float32(2.0)))
    np.testing.assert_array_equal(z.numpy(), expected)
    np.testing.assert_array_equal(w.numpy(), expected)
    np.testing.assert_array_equal(v.numpy(), expected)


def test_errors_are_the_general_runners_at_the_record_line():
    x = tape.Variable(np.ones((2, 3), np.float32), stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        tape.ops.elementwise_add(x, x)      # the plan is known: what follows fails on its own
        with pytest.raises(InvalidArgumentError, match="elementwise_add"):
            tape.ops.elementwise_add(x, tape.Variable(np.ones((4, 5), np.float32)))
        with pytest.raises(InvalidArgumentError, match="sigmoid: input 'X' expects a "
                                                       "Variable, received ndarray"):
            tape.ops.sigmoid(np.ones(3, np.float32))
        old = x * 2.0
        tape.reset_global_tape()
        with pytest.raises(PreconditionNotMetError, match="was computed on a tape that has "
                                                          "since been reset"):
            old * 3.0
        with pytest.raises(PreconditionNotMetError, match="was computed on a tape that has "
                                                          "since been reset"):
            tape.ops.sigmoid(old)


def test_every_positional_op_has_a_lazy_positional_runner():
    for op_type in POSITIONAL_CASES:
        info = op_info(op_type)
        assert positional_slots(info) is not None
        assert tape.tape.lazy_positional_runner(info) is info.lazy_positional is not None


def test_a_graph_past_the_op_limit_takes_the_per_op_path(monkeypatch):
    """A tape of more ops than ``tape.lazy_replay`` keeps a program for (its walker would take
    seconds to compile) is never cached: every backward takes the per-op path, and is right."""
    from tape import lazy_replay
    monkeypatch.setattr(lazy_replay, "_entries", {})
    monkeypatch.setattr(lazy_replay, "_seen", set())
    x = tape.Variable(np.arange(4, dtype=np.float32), stop_gradient=False)
    before = lazy_replay.replays
    for _ in range(3):
        x.grad = None
        with tape.lazy():
            t = tape.reset_global_tape()
            y = x
            while len(t._ops) < lazy_replay.MAX_OPS:
                y = y * 1.0
            loss = tape.ops.reduce_sum(y, reduce_all=True)
            assert len(t.deferred) == lazy_replay.MAX_OPS + 1
            loss.backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones(4, np.float32))
    assert lazy_replay.replays == before
