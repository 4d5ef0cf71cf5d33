"""The cached backward's walker (``tape.replay_walker``) refuses every graph that is not the
one its schedule was made for, though its plans, and so its signature, are the same: a reader
wired to another op or another output, an op recorded at another position or on another
tape, a given array where a ref was or the other way round, an op that ran. Each such graph
takes the uncached path, with its results bit for bit (``test_unit_schedule.uncached``)."""
import numpy as np
import pytest
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_schedule import assert_same, sequences, weights

import tape
from tape import Variable, lazy_replay, ops
from tape.lazy_runner import Records
from tape.replay_walker import NOT_ALIKE

LENGTH = 5


def record(params, data, variant=None):
    """The loss of ``test_unit_schedule.step``'s graph over ``data``, recorded on a new lazy
    tape; sequence 1 changed as ``variant`` says (changes joined by " + "), its plans all the
    same."""
    w, u = params
    losses, joined, steps = [], None, None
    for n, sequence in enumerate(data):
        changed = set(variant.split(" + ")) if n == 1 and variant else set()
        source = Variable(sequence, stop_gradient=False)
        if "a ref for a given array" in changed:    # (sequence 0's joined steps: same shape)
            source = joined
        xs = ops.split(source, num=len(sequence), axis=0)
        if "another output index" in changed:
            xs = [xs[0], xs[2], *xs[2:]]
        if "another split's output" in changed:
            xs = [xs[0], steps[1], *xs[2:]]
        steps = xs
        h = ops.tanh(ops.matmul_v2(xs[0], w))
        hs = [h]
        for t, x in enumerate(xs[1:], 1):
            read = hs[-2] if "another producer" in changed and t == 3 else h
            if "a given array for a ref" in changed and t == 3:
                read = Variable(np.ones((1, 4), np.float32), stop_gradient=False)
            # (a weight changed at the last step: the walker, going back from the loss,
            # reads it before an earlier step's change)
            weight, value = w, w._value
            if t == LENGTH - 1 and "another array of the weight" in changed:
                w._value = value * 2    # (one product reads another array of the Variable)
            if t == LENGTH - 1 and "another Variable of the weight's array" in changed:
                weight = Variable(value, stop_gradient=False)
                assert weight._value is value
            if "two ops recorded the other way round" in changed and t == 2:
                b = ops.matmul_v2(read, u)
                a = ops.matmul_v2(x, weight)
            else:
                a = ops.matmul_v2(x, weight)
                b = ops.matmul_v2(read, u)
            w._value = value
            h = ops.tanh(a + b)
            hs.append(h)
        joined = ops.concat(hs, axis=0)
        losses.append(ops.mean(joined))
    return ops.scale(ops.sum(losses), scale=1.0 / len(losses))


def train(params, data, variant=None, before=None):
    """One lazy step of ``record``'s graph (``before(loss)`` first): loss and leaf gradients."""
    with tape.lazy():
        tape.reset_global_tape()
        loss = record(params, data, variant)
        if before is not None:
            before(loss)
        loss.backward()
    grads = []
    for p in params:    # (read and cleared, as an optimizer step does)
        grads.append(p.grad.value().copy())
        p.grad = None
    return loss.value().copy(), grads, []


def uncached(params, data, variant=None, before=None):
    """``train`` by the uncached path: its graph never seen before."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lazy_replay, "_entries", {})
        patch.setattr(lazy_replay, "_seen", set())
        return train(params, data, variant, before)


@pytest.fixture
def walks(monkeypatch):
    """What the cached graph's walker answers per backward (None: refused; ``NOT_ALIKE``; else
    the type of its answer), after three steps of the unchanged graph (the schedule runs from
    the third). Wrapped from its first walk: the wrapper's references are in every state."""
    answers = []
    new_walker = lazy_replay._new_walker

    def noting(entry, *args):
        if not new_walker(entry, *args):
            return False
        entry.walk = noted(entry.walk, answers)
        return True
    monkeypatch.setattr(lazy_replay, "_new_walker", noting)
    params, data = weights(), sequences(LENGTH)
    for _ in range(3):
        train(params, data)
    assert answers == [tuple, tuple]
    return params, data, answers


def noted(walk, answers: list):
    """``walk``, noting in ``answers`` what it answers: None, ``NOT_ALIKE`` or its type."""
    def answering(*args):
        found = walk(*args)
        answers.append(found if found in (None, NOT_ALIKE) else type(found))
        return found
    return answering


def test_the_unchanged_graph_is_walked_and_its_schedule_runs(walks):
    params, data, answers = walks
    before = lazy_replay.unit_replays
    got = train(params, data)
    assert lazy_replay.unit_replays == before + 1 and answers[-1] is tuple
    assert_same(got, uncached(params, data))


@pytest.mark.parametrize("variant", [
    "another producer",         # a reader of another op's output (its readers are others)
    "another output index",     # a split's output 2 where output 1 was
    "another split's output",   # sequence 0's split's output 1 where its own was
    "two ops recorded the other way round",     # each op at the other's position
    "a ref for a given array",  # the split of sequence 1 reads sequence 0's steps
    "a given array for a ref",  # a product of a given array where a step's h was
])
def test_a_graph_wired_otherwise_is_refused(walks, variant):
    params, data, answers = walks
    before = lazy_replay.unit_replays
    got = train(params, data, variant)
    assert answers[-1] is None and lazy_replay.unit_replays == before
    assert_same(got, uncached(params, data, variant))
    before = lazy_replay.unit_replays
    assert_same(train(params, data), uncached(params, data))     # (the schedule still runs)
    assert answers[-1] is tuple and lazy_replay.unit_replays == before + 1


def test_an_op_filed_on_other_records_at_the_same_position_is_refused(walks):
    """An op whose record is another tape's records (equal to this one's: as many, all None)
    at the same position: the walker tells them apart by identity. (A graph cannot read a
    gradient-carrying value of another tape: its runners refuse it, so the op is refiled by
    hand.)"""
    params, data, answers = walks
    with tape.lazy():
        t = tape.reset_global_tape()
        loss = record(params, data)
        split = next(o for o in _graph_ops(loss) if o.record[1] == 0)
        other = Records()
        other.extend(t.deferred)
        assert other == t.deferred and other is not t.deferred
        split.record = (other, 0)
        _walk(loss, t)
        split.record = (t.deferred, 0)
        _walk(loss, t)
        assert answers[-2:] == [None, tuple]


def _walk(loss, t) -> None:
    """The cached graph's walker on the graph of ``loss``, recorded on ``t``."""
    entry, = (e for e in lazy_replay._entries.values() if e is not None)
    entry.walk(loss._lazy[0], t._ops, t.deferred)


def test_an_op_that_ran_is_refused(walks):
    """An op of the graph with results (as a run leaves them) but its record not filed (by
    hand: a run files it, and ``attempt`` refuses a tape with a record filed before the
    walker runs): the walker's own check. The loss computed before backward: refused,
    results bit for bit."""
    params, data, answers = walks
    with tape.lazy():
        t = tape.reset_global_tape()
        loss = record(params, data)
        lazy_op = next(o for o in _graph_ops(loss) if o.record[1] == 7)
        lazy_op.results = ()
        _walk(loss, t)
        lazy_op.results = None
        _walk(loss, t)
        assert answers[-2:] == [None, tuple]
    before = lazy_replay.unit_replays
    got = train(params, data, before=lambda loss: loss.value())
    assert lazy_replay.unit_replays == before
    assert_same(got, uncached(params, data, before=lambda loss: loss.value()))


def _graph_ops(loss) -> list:
    """The pending ops ``loss`` depends on."""
    found, stack = {}, [loss._lazy[0]]
    while stack:
        op = stack.pop()
        if id(op) in found:
            continue
        found[id(op)] = op
        for a in op.args.values():
            for x in a if type(a) is list else (a,):
                if type(x) is tuple:
                    stack.append(x[0])
    return list(found.values())
