"""Positional runners (tape.positional): the commonest eager call, ``tape.ops.<type>(x, ...)``
and the operators, served without the general runner's dicts, and every other call handed to
the general runner before any work.

The suite runs with the unused-input check on (tests/conftest.py), and a positional runner
leaves every checked call to the general one: the tests here turn the checks off, as
benchmarks and users run, so that the positional path itself runs.
"""
import numpy as np
import pytest
from test_ops import CASE_OPS

import tape
from tape import overloads
from tape.attr_signature import is_exact, listed_signature, token
from tape.desc import VarDesc
from tape.errors import InvalidArgumentError, PreconditionNotMetError
from tape.positional import positional_slots
from tape.registry import OpInfo, op_info
from tape.tape import using_tape
from tape.testing import Draw

_CHECKS = ("FLAGS_enable_unused_var_check", "FLAGS_check_nan_inf")


@pytest.fixture
def unchecked():
    saved = tape.get_flags(list(_CHECKS))
    tape.set_flags(dict.fromkeys(_CHECKS, False))
    yield
    tape.set_flags(saved)


@pytest.fixture
def general_calls(monkeypatch):
    """``watch(info)``: from then on, each call of the op's general runner is counted in the
    list it returns."""
    def watch(info):
        calls = []
        general = info.runner or tape.tape.runner(info)

        def counted(*args):
            calls.append(info.type)
            return general(*args)
        monkeypatch.setattr(info, "runner", counted)
        return calls
    return watch


def _served_positionally(op_type) -> dict | None:
    """The case of ``op_type`` (seed 0) when it gives exactly the op's required slots, one
    Variable each (what a positional runner takes), else None."""
    info = op_info(op_type)
    required = positional_slots(info)
    if required is None:
        return None
    inputs, attrs = info.case(Draw.from_seed(0))
    if set(inputs) != set(required) or any(isinstance(v, (list, tuple))
                                           for v in inputs.values()):
        return None
    return inputs, attrs


POSITIONAL_CASES = [t for t in CASE_OPS if _served_positionally(t) is not None]


def _variables(info, inputs) -> list:
    wrt = set(info.grad.grads) if info.grad is not None else set()
    return [tape.Variable(np.array(inputs[slot]), stop_gradient=not (
                slot in wrt and np.asarray(inputs[slot]).dtype.kind == "f"))
            for slot in positional_slots(info)]


def _describe(entries, variables) -> list:
    """Each entry as ("Variable" or "VarDesc", index of the input Variable it stands for)."""
    def which(e):
        for i, v in enumerate(variables):
            if e is v:
                return "Variable", i
            if e is v.desc:
                return "VarDesc", i
        return type(e).__name__, -1
    return [which(e) for e in entries]


@pytest.mark.parametrize("op_type", POSITIONAL_CASES)
def test_positional_calls_match_the_general_runner(op_type, unchecked, general_calls):
    """Run by name through the general runner, then positionally on a fresh tape (the plan
    is cached): the same values bit for bit, the same Variables, the same handle entries."""
    info = op_info(op_type)
    inputs, attrs = _served_positionally(op_type)
    names = positional_slots(info)
    general_tape, positional_tape = tape.Tape(), tape.Tape()
    xs = _variables(info, inputs)
    with using_tape(general_tape):
        tape.seed(0)
        produced = tape.tape.runner(info)(general_tape, {n: [x] for n, x in zip(names, xs)},
                                          dict(attrs))
    traced = tape.Tape(tracing=True)    # (records every op: its handle shows the plan)
    with using_tape(traced):
        tape.seed(0)
        tape.tape.runner(info)(traced, {n: [x] for n, x in zip(names, xs)}, dict(attrs))
    plan = traced._ops[0].plan
    calls = general_calls(info)
    with using_tape(positional_tape):
        tape.seed(0)
        returned = getattr(tape.ops, op_type)(*xs, **attrs)
    served = plan.made is not None and all(
        m is not None for m, s in zip(plan.made, info.outputs)
        if not (s.duplicable or s.dispensable))
    assert calls == ([] if served else [op_type])
    visible = [s for s in info.outputs if not s.intermediate]
    returned = returned if len(visible) > 1 else (returned,)
    for slot, got in zip(visible, returned):
        want = produced.get(slot.name)
        if slot.duplicable:
            assert (got is None) == (want is None), f"{op_type}: {slot.name}"
        else:
            assert (got is None) == (not want), f"{op_type}: {slot.name}"
            got, want = ([got], want) if got is not None else ([], [])
        for g, w in zip(got or (), want or (), strict=True):
            assert (g.shape, g.dtype, g.stop_gradient, g.is_leaf, g.grad, g.place) == \
                   (w.shape, w.dtype, w.stop_gradient, w.is_leaf, w.grad, w.place), op_type
            assert g.desc.persistable is False and g.desc.type == w.desc.type
            if w.value() is not None:
                np.testing.assert_array_equal(g.value(), w.value(), err_msg=op_type)
                assert g.value().dtype == w.value().dtype
    assert len(positional_tape) == len(general_tape)
    if len(general_tape):
        g, p = general_tape._ops[0], positional_tape._ops[0]
        assert p.plan is g.plan and len(p.entries) == len(g.entries)
        # the inputs' entries: the same Variable or VarDesc of the same input; the outputs'
        # (intermediates too): a Variable or VarDesc alike, of the same description
        assert _describe(p.entries[:len(xs)], xs) == _describe(g.entries[:len(xs)], xs)
        for e, f in zip(p.entries[len(xs):], g.entries[len(xs):]):
            assert type(e) is type(f), op_type
            d, w = (e.desc, f.desc) if type(e) is tape.Variable else (e, f)
            assert (d.shape, d.dtype, d.stop_gradient) == (w.shape, w.dtype, w.stop_gradient)


def test_the_operators_and_ops_run_positionally_once_the_plan_is_known(unchecked,
                                                                        general_calls):
    x = tape.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
                      stop_gradient=False)
    w = tape.Variable(np.ones((3, 4), np.float32), stop_gradient=False)

    def step():
        tape.reset_global_tape()
        x.grad = w.grad = None
        y = tape.ops.tanh(x * 1.5 + 0.25) @ w
        parts = tape.ops.split(y, num=2, axis=1)
        loss = tape.ops.reduce_sum(tape.ops.sigmoid(parts[0] - parts[1]), reduce_all=True)
        loss.backward()
        return loss.item(), x.grad.numpy().copy(), w.grad.numpy().copy()

    first = step()
    calls = [general_calls(op_info(t)) for t in ("scale", "tanh", "matmul_v2", "split",
                                                  "elementwise_sub", "sigmoid")]
    again = step()
    assert calls == [[]] * 6
    assert first[0] == again[0]
    for a, b in zip(first[1:], again[1:]):
        np.testing.assert_array_equal(a, b)


def test_a_call_the_positional_runner_cannot_serve_gets_the_general_runners_error(unchecked):
    x = tape.Variable(np.ones(3, np.float32), stop_gradient=False)
    tape.reset_global_tape()
    tape.ops.sigmoid(x)     # the plan is known: what follows is refused on its own merits
    with pytest.raises(InvalidArgumentError, match="sigmoid: input 'X' is required"):
        tape.ops.sigmoid(None)
    with pytest.raises(InvalidArgumentError, match="sigmoid: input 'X' expects a Variable, "
                                                   "received ndarray"):
        tape.ops.sigmoid(np.ones(3, np.float32))
    with pytest.raises(InvalidArgumentError, match="elementwise_add: input 'Y' expects a "
                                                   "Variable, received list"):
        tape.ops.elementwise_add(x, [x])
    with pytest.raises(TypeError, match="sigmoid takes at most 1 inputs"):
        tape.ops.sigmoid(x, x)
    old = tape.ops.sigmoid(x)
    tape.reset_global_tape()
    with pytest.raises(PreconditionNotMetError, match=r"sigmoid: input 'X' \(.*\) was computed "
                                                      "on a tape that has since been reset"):
        tape.ops.sigmoid(old)
    with pytest.raises(PreconditionNotMetError, match="was computed on a tape that has since"):
        old * 2.0
    with pytest.raises(PreconditionNotMetError, match="was computed on a tape that has since"):
        old + old


def test_a_spent_tape_restarts_or_refuses_as_the_general_runner_does(unchecked):
    x = tape.Variable(np.ones(3, np.float32), stop_gradient=False)
    tape.reset_global_tape()
    tape.ops.reduce_sum(x * 2.0, reduce_all=True).backward()
    spent = tape.get_global_tape()
    y = x * 3.0     # on the thread's spent tape: a new tape is started
    assert tape.get_global_tape() is not spent and y._tape == tape.get_global_tape().serial
    other = tape.Tape()
    other._spent = True
    with using_tape(tape.Tape()), pytest.raises(PreconditionNotMetError, match="spent"):
        overloads._SCALE.positional(other, {"scale": 2.0}, None, x)


def test_no_grad_and_tracing_record_as_the_general_runner_does(unchecked):
    x = tape.Variable(np.ones((2, 3), np.float32), stop_gradient=False)
    c = tape.Variable(np.ones((2, 3), np.float32))
    tape.reset_global_tape()
    tape.ops.sigmoid(x), tape.ops.sigmoid(c)
    t = tape.get_global_tape()
    before = len(t)
    with tape.no_grad():
        y = tape.ops.sigmoid(x)
    z = tape.ops.sigmoid(c)     # no input wants a gradient: nothing recorded
    assert len(t) == before
    assert y.stop_gradient and y.is_leaf and z.stop_gradient and z.is_leaf
    traced = tape.Tape(tracing=True)
    with using_tape(traced):
        w = tape.ops.sigmoid(c)
        u = c * 2.0
    assert [h.entries for h in traced] == [(c, w), (c, u)]     # tracing keeps every Variable
    assert w.stop_gradient and not w.is_leaf


def test_a_pending_input_is_computed_first(unchecked):
    x = tape.Variable(np.full(3, 0.5, np.float32), stop_gradient=False)
    tape.reset_global_tape()
    tape.ops.exp(x)
    with tape.lazy():
        y = tape.ops.exp(x)
    assert y.pending
    z = tape.ops.exp(y)     # eager again: y runs first
    np.testing.assert_array_equal(z.numpy(), np.exp(np.exp(np.full(3, 0.5, np.float32))))


def test_a_spy_on_tape_run_sees_the_ops_that_tape_ops_runs(unchecked, request):
    x = tape.Variable(np.ones(3, np.float32))
    tape.ops.relu(x)    # (the plan is known: the positional runner could serve the next call)
    seen = request.getfixturevalue("ops_seen_by_tape_run")
    tape.ops.relu(x)
    tape.ops.elementwise_add(x, x)
    assert seen == ["relu", "elementwise_add"]


def test_tokens_are_exact_signatures_never_shared():
    a, b = token(), token()
    assert a != b and is_exact(a) and is_exact(b)


def test_products_and_sums_stay_right_when_their_caches_are_cleared(unchecked):
    x = tape.Variable(np.array([1.0, -2.0, 3.0], np.float32), stop_gradient=False)
    tape.reset_global_tape()
    want = [(x * 2.5).numpy(), (x + 0.5).numpy(), (x * 4.0).numpy()]
    for cache in overloads._float_caches:
        cache.clear()
    got = [(x * 2.5).numpy(), (x + 0.5).numpy(), (x * 4.0).numpy()]
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0], x.numpy() * np.float32(2.5))
    nan = float("nan")
    assert np.isnan((x * nan).numpy()).all() and np.isnan((x + nan).numpy()).all()


def test_a_temporary_desc_made_positionally_is_a_full_vardesc(unchecked):
    x = tape.Variable(np.ones(3, np.float32), stop_gradient=False)
    tape.reset_global_tape()
    x * 2.0
    d = (x * 2.0).desc
    assert type(d) is VarDesc
    assert (d.persistable, d.need_check_feed, d.stop_gradient, d.shape) == (False, False, False,
                                                                          (3,))
    assert d.name.startswith("tmp_") and d.name == d.name


def test_a_list_attribute_finds_its_plan_and_a_wrong_one_is_refused_every_time(unchecked,
                                                                              monkeypatch):
    """A list attribute is keyed by its listed signature (items and their types): the call
    finds its plan without checking the attributes again, and a list of the wrong item type
    never finds another's plan."""
    info = op_info("reshape2")
    x = tape.Variable(np.ones((2, 3), np.float32))
    tape.reset_global_tape()
    tape.ops.reshape2(x, shape=[3, 2])
    checks, check = [], OpInfo.check_attrs

    def counted(self, attrs):
        checks.append(self.type)
        return check(self, attrs)
    monkeypatch.setattr(OpInfo, "check_attrs", counted)
    plans = len(info.plans)
    assert tape.ops.reshape2(x, shape=[3, 2]).shape == (3, 2)
    assert tape.ops.reshape2(x, shape=[3, 2]).shape == (3, 2)
    assert len(info.plans) == plans and checks == []
    for _ in range(2):
        for wrong in ([3.0, 2.0], [True, 6]):
            with pytest.raises(InvalidArgumentError, match="reshape2: attribute 'shape' expects "
                                                           "INTS"):
                tape.ops.reshape2(x, shape=wrong)
    assert checks == ["reshape2"] * 4
    assert listed_signature({"a": [1, 2]}) != listed_signature({"a": [1.0, 2.0]})
    assert listed_signature({"a": [1, 2]}) != listed_signature({"a": (1, 2)})


def test_no_grad_in_one_thread_leaves_another_recording(unchecked):
    """Runners read a thread's no_grad depth only while some thread has a block open
    (``tape._no_grad_blocks``): the count follows the blocks, errors included, and a block
    in one thread never stops another from recording."""
    import threading

    from tape.tape import _no_grad_blocks
    x = tape.Variable(np.ones(3, np.float32), stop_gradient=False)
    inside, done = threading.Event(), threading.Event()

    def other():
        with tape.no_grad():
            inside.set()
            done.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        inside.wait(10)
        assert _no_grad_blocks[0] == 1
        tape.reset_global_tape()
        y = x * 2.0
        assert not y.stop_gradient and len(tape.get_global_tape()) == 1
        with tape.no_grad():
            assert _no_grad_blocks[0] == 2
            assert (x * 2.0).stop_gradient
    finally:
        done.set()
        thread.join()
    with pytest.raises(ZeroDivisionError), tape.no_grad():
        raise ZeroDivisionError
    assert _no_grad_blocks[0] == 0
    assert not (x * 2.0).stop_gradient
