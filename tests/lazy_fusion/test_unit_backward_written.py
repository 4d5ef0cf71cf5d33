"""The batched backward of a cached unit graph written out (``tape.unit_backward``): written
once, by the run after the schedule's first, from what that first run kept, and run from then
on; every run's loss, parameter and per-sample gradients bit for bit the uncached unit
path's, with other data too."""
import numpy as np
import pytest
import test_unit_schedule
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_backward import (
    assert_same_as,
    counting,
    the_schedule,
    with_sample_grads,
)
from test_unit_schedule import TREES, WIDTH, forest_step, sequences, step, uncached, weights

import tape
from tape import Variable, batched_backward, batching, lazy_replay, ops, unit_schedule


def cached_runs(monkeypatch, run, arguments: list) -> None:
    """Two uncached runs of ``run(*arguments[0])``, then ``run(*a)`` for each ``a`` of
    ``arguments`` (the schedule's runs): the first cached run takes the generic unit
    backward, the next writes the backward out and runs it, later ones run it; each run's
    loss, parameter and samples' gradients bit for bit those of ``run(*a)`` uncached.

    Every array a grad kernel returns is made read-only: a kernel may hand one array to two
    inputs (an add's gradient, unbroadcast), so a sum's first part is kept as it is, the
    second makes a new array, and only that one takes later parts in place, for the units'
    gradients and the leaves' alike (an add into a kernel's array raises)."""
    invoke = batching.invoke

    def read_only(plan, arrays, wants=None, names=None):
        results = invoke(plan, arrays, wants, names)
        if plan.info.type.endswith("_grad"):
            for a in results:
                for part in a if type(a) is list else (a,):
                    if type(part) is np.ndarray:
                        part.flags.writeable = False
        return results

    monkeypatch.setattr(batching, "invoke", read_only)
    for _ in range(2):
        run(*arguments[0])
    generic = counting(monkeypatch, batched_backward, "_unit_backward")
    written = counting(monkeypatch, unit_schedule, "write_backward")
    before = lazy_replay.unit_replays
    results, counts = [], []
    for a in arguments:
        results.append(with_sample_grads(monkeypatch, run, *a))
        counts.append((len(generic), len(written)))
        generic.clear()
        written.clear()
    assert lazy_replay.unit_replays == before + len(arguments)
    assert counts[0][0] > 4 and counts[0][1] == 0 and counts[1:] == [(0, 1)] + [(0, 0)] * (
        len(arguments) - 2)
    assert the_schedule().layout.written
    for a, result in zip(arguments, results):
        lazy_replay._entries, lazy_replay._seen = {}, set()     # (fresh_cache restores them)
        assert_same_as(monkeypatch, result, run, *a)


def cached_steps(monkeypatch, losses_of) -> None:
    """``cached_runs`` of ``training_step`` over ``losses_of(sequences(5, seed))``."""
    params = weights()
    cached_runs(monkeypatch, lambda seed: training_step(params, losses_of(sequences(5, seed))),
                [(seed,) for seed in (1, 2, 3)])


def training_step(params, losses_of) -> tuple:
    """One lazy step over the loss ``ops.sum`` of what ``losses_of(*params)`` yields,
    returned as ``step`` returns its own."""
    with tape.lazy():
        tape.reset_global_tape()
        loss = ops.sum(list(losses_of(*params)))
        loss.backward()
    grads = [p.grad.value().copy() for p in params]
    for p in params:
        p.grad = None
    return loss.value().copy(), grads, []


def test_sequences_run_the_written_backward_from_the_second_cached_run(monkeypatch):
    params = weights()
    seeds = (1, 2, 3, 4)
    cached_runs(monkeypatch, step, [(params, sequences(5, seed)) for seed in seeds])


def test_a_forest_runs_the_written_backward_bit_for_bit(monkeypatch):
    """Rows handed back to the several batches a batch of tree nodes read (by slices, index
    arrays and blocks), and each tree leaf's part of a batch's gradient: bit for bit."""
    params = weights() + weights(seed=5)[:1]
    seeds = (0, 1, 2, 3)
    cached_runs(monkeypatch, forest_step, [(params, TREES, seed) for seed in seeds])


def test_one_weight_in_both_places_sums_its_parts_in_order(monkeypatch):
    """A leaf's gradient parts: the first kept, the second a new sum, the rest added to it
    in place, in the order the units reach them (two weights' parts on one leaf)."""
    w, _ = weights()
    cached_runs(monkeypatch, step, [((w, w), sequences(5, seed)) for seed in (1, 2, 3)])


def test_a_leaf_with_a_gradient_gets_the_sum(monkeypatch):
    """A leaf's gradient from before backward is added to, as eager backward does."""
    params = weights()

    def accumulating(data):
        for p in params:
            p.grad = Variable(np.full((WIDTH, WIDTH), 0.25, np.float32))
        return step(params, data)

    cached_runs(monkeypatch, accumulating, [(sequences(5, seed),) for seed in (1, 2, 3)])


def skipping_losses(data):
    """``step``'s sequences, each of whose last character is split off and never read: the
    split's gradient gets zeros for that output, which no gradient reaches."""
    def losses(w, u):
        for sequence in data:
            given = test_unit_schedule.Variable(sequence, stop_gradient=False)  # (noted)
            xs = ops.split(given, num=len(sequence), axis=0)
            h = ops.tanh(ops.matmul_v2(xs[0], w))
            for x in xs[1:-1]:
                h = ops.tanh(ops.matmul_v2(x, w) + ops.matmul_v2(h, u))
            yield ops.mean(h)
    return losses


def test_an_output_no_gradient_reaches_gets_zeros(monkeypatch):
    cached_steps(monkeypatch, skipping_losses)


def partly_stopped_losses(data):
    """``step``'s sequences, each started from its own given state ``v``: ``tanh(v)`` of
    every sequence runs as one batch, but only the first sequence's gradient flows back
    through it (the others' stop): the other rows of that batch are reached by no gradient,
    so their given ``v`` get none. ``sigmoid(v)``, read by a product that wants only its
    weight's gradient, is a batch no gradient reaches: its backward does not run."""
    def losses(w, u):
        for n, sequence in enumerate(data):
            v = test_unit_schedule.Variable(sequence[:1] * 0.5, stop_gradient=False)
            h = ops.tanh(v)
            h.stop_gradient = n > 0
            s = ops.sigmoid(v)
            s.stop_gradient = True
            given = test_unit_schedule.Variable(sequence, stop_gradient=False)
            for x in ops.split(given, num=len(sequence), axis=0):
                h = ops.tanh(ops.matmul_v2(x, w) + ops.matmul_v2(h, u))
            yield ops.mean(h) + ops.mean(ops.matmul_v2(s, u))
    return losses


def test_rows_no_gradient_reached_give_their_arrays_none(monkeypatch):
    cached_steps(monkeypatch, partly_stopped_losses)


def test_a_graph_the_writer_refuses_keeps_the_generic_path(monkeypatch):
    """Where the first cached run kept no place for a gradient (here: its kept places
    dropped), the backward is not written, never tried again, and the generic path runs."""
    params = weights()
    for seed in (1, 1, 1):
        step(params, sequences(5, seed))
    layout = the_schedule().layout
    for kept in layout.kept:
        kept.clear()
    written = counting(monkeypatch, unit_schedule, "write_backward")
    results = [with_sample_grads(monkeypatch, step, params, sequences(5, seed))
               for seed in (2, 3)]
    assert layout.written is False and len(written) == 1
    for seed, result in zip((2, 3), results):
        assert_same_as(monkeypatch, result, uncached, params, sequences(5, seed))


def test_an_error_in_the_written_backward_releases_every_unit_and_handle(monkeypatch):
    """A grad kernel that raises in the written backward: the error reaches the caller, and
    every unit (those not reached yet too) and the handles let go of their values; the next
    step runs bit for bit."""
    params = weights()
    for _ in range(4):
        step(params, sequences(5))
    layout = the_schedule().layout
    assert layout.written
    invoke, run, released, given = batching.invoke, unit_schedule.HandleLayout.run, set(), []
    grad_calls = []

    def failing(plan, arrays, wants=None, names=None):
        if plan.info.type.endswith("_grad"):
            grad_calls.append(plan)
            if len(grad_calls) == 3:
                raise RuntimeError("kernel failed")
        return invoke(plan, arrays, wants, names)

    def running(self, handles, records, loss):
        given.append(handles)
        return run(self, handles, records, loss)

    monkeypatch.setattr(batching, "invoke", failing)
    monkeypatch.setattr(batched_backward, "_release", lambda unit: released.add(id(unit)))
    monkeypatch.setattr(unit_schedule.HandleLayout, "run", running)
    with pytest.raises(RuntimeError, match="kernel failed"):
        step(params, sequences(5, 2))
    assert len(released) == len(layout.order) and given == [[]]
    monkeypatch.undo()
    test_unit_schedule.assert_same(step(params, sequences(5, 3)),
                                   uncached(params, sequences(5, 3)))


def ragged(seed: int) -> list:
    """``sequences``, one of them shorter: a batch's rows read by a batch of fewer ops."""
    return [x[:length] for x, length in zip(sequences(5, seed), (5, 5, 5, 5, 5, 4))]


def test_sequences_of_several_lengths(monkeypatch):
    w, u = weights()
    cached_runs(monkeypatch, step, [((w, u), ragged(seed)) for seed in (1, 2, 3)])
