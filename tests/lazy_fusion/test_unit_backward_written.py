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
    uncached_forest,
    with_sample_grads,
)
from test_unit_schedule import TREES, WIDTH, forest_step, sequences, step, uncached, weights

import tape
from tape import Variable, batched_backward, batching, lazy_replay, ops, unit_schedule


def cached_runs(monkeypatch, run, arguments: list) -> list:
    """Two uncached runs of ``run(*arguments[0])``, then ``run(*a)`` for each ``a`` of
    ``arguments`` (the schedule's runs), with the samples' gradients: the first cached run
    takes the generic unit backward, the next writes the backward out and runs it, later
    ones run it."""
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
    return results


def test_sequences_run_the_written_backward_from_the_second_cached_run(monkeypatch):
    params = weights()
    seeds = (1, 2, 3, 4)
    results = cached_runs(monkeypatch, step, [(params, sequences(5, seed)) for seed in seeds])
    for seed, result in zip(seeds, results):
        assert_same_as(monkeypatch, result, uncached, params, sequences(5, seed))


def test_a_forest_runs_the_written_backward_bit_for_bit(monkeypatch):
    """Rows handed back to the several batches a batch of tree nodes read (by slices, index
    arrays and blocks), and each tree leaf's part of a batch's gradient: bit for bit."""
    params = weights() + weights(seed=5)[:1]
    seeds = (0, 1, 2, 3)
    results = cached_runs(monkeypatch, forest_step, [(params, TREES, seed) for seed in seeds])
    for seed, result in zip(seeds, results):
        assert_same_as(monkeypatch, result, uncached_forest, params, seed)


def test_one_weight_in_both_places_sums_its_parts_in_order(monkeypatch):
    """A leaf's gradient parts: the first kept, the second a new sum, the rest added to it
    in place, in the order the units reach them (two weights' parts on one leaf)."""
    w, _ = weights()
    results = cached_runs(monkeypatch, step, [((w, w), sequences(5, seed)) for seed in (1, 2, 3)])
    for seed, result in zip((1, 2, 3), results):
        assert_same_as(monkeypatch, result, uncached, (w, w), sequences(5, seed))


def test_a_leaf_with_a_gradient_gets_the_sum(monkeypatch):
    """A leaf's gradient from before backward is added to, as eager backward does."""
    params = weights()

    def accumulating(data):
        for p in params:
            p.grad = Variable(np.full((WIDTH, WIDTH), 0.25, np.float32))
        return step(params, data)

    results = cached_runs(monkeypatch, accumulating, [(sequences(5, seed),) for seed in (1, 2, 3)])
    saved = lazy_replay._entries, lazy_replay._seen
    try:
        for seed, result in zip((1, 2, 3), results):
            lazy_replay._entries, lazy_replay._seen = {}, set()
            assert_same_as(monkeypatch, result, accumulating, sequences(5, seed))
    finally:
        lazy_replay._entries, lazy_replay._seen = saved


def skipping_step(params, data):
    """``step``'s sequences, each of whose last character is split off and never read: the
    split's gradient gets zeros for that output, which no gradient reaches."""
    w, u = params
    with tape.lazy():
        tape.reset_global_tape()
        losses = []
        for sequence in data:
            given = test_unit_schedule.Variable(sequence, stop_gradient=False)  # (noted)
            xs = ops.split(given, num=len(sequence), axis=0)
            h = ops.tanh(ops.matmul_v2(xs[0], w))
            for x in xs[1:-1]:
                h = ops.tanh(ops.matmul_v2(x, w) + ops.matmul_v2(h, u))
            losses.append(ops.mean(h))
        loss = ops.sum(losses)
        loss.backward()
    grads = [p.grad.value().copy() for p in params]
    for p in params:
        p.grad = None
    return loss.value().copy(), grads, []


def test_an_output_no_gradient_reaches_gets_zeros(monkeypatch):
    params = weights()
    results = cached_runs(monkeypatch, skipping_step,
                          [(params, sequences(5, seed)) for seed in (1, 2, 3)])
    saved = lazy_replay._entries, lazy_replay._seen
    try:
        for seed, result in zip((1, 2, 3), results):
            lazy_replay._entries, lazy_replay._seen = {}, set()
            assert_same_as(monkeypatch, result, skipping_step, params, sequences(5, seed))
    finally:
        lazy_replay._entries, lazy_replay._seen = saved


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


def partly_stopped_step(params, data):
    """``step``'s sequences, each started from its own given state ``v``: ``tanh(v)`` of
    every sequence runs as one batch, but only the first sequence's gradient flows back
    through it (the others' stop): the other rows of that batch are reached by no gradient,
    so their given ``v`` get none. ``sigmoid(v)``, read by a product that wants only its
    weight's gradient, is a batch no gradient reaches: its backward does not run."""
    w, u = params
    with tape.lazy():
        tape.reset_global_tape()
        losses = []
        for n, sequence in enumerate(data):
            v = test_unit_schedule.Variable(sequence[:1] * 0.5, stop_gradient=False)
            h = ops.tanh(v)
            h.stop_gradient = n > 0
            s = ops.sigmoid(v)
            s.stop_gradient = True
            given = test_unit_schedule.Variable(sequence, stop_gradient=False)
            for x in ops.split(given, num=len(sequence), axis=0):
                h = ops.tanh(ops.matmul_v2(x, w) + ops.matmul_v2(h, u))
            losses.append(ops.mean(h) + ops.mean(ops.matmul_v2(s, u)))
        loss = ops.sum(losses)
        loss.backward()
    grads = [p.grad.value().copy() for p in params]
    for p in params:
        p.grad = None
    return loss.value().copy(), grads, []


def test_rows_no_gradient_reached_give_their_arrays_none(monkeypatch):
    params = weights()
    results = cached_runs(monkeypatch, partly_stopped_step,
                          [(params, sequences(5, seed)) for seed in (1, 2, 3)])
    for seed, result in zip((1, 2, 3), results):
        lazy_replay._entries, lazy_replay._seen = {}, set()     # (fresh_cache restores them)
        assert_same_as(monkeypatch, result, partly_stopped_step, params, sequences(5, seed))



def ragged(seed: int) -> list:
    """``sequences``, of several lengths: a batch's rows read by batches of fewer ops."""
    return [x[:length] for x, length in zip(sequences(5, seed), (5, 5, 5, 5, 5, 4))]


@pytest.mark.parametrize("graph", ["sequences", "one weight twice",
                                   "sequences of several lengths", "forest"])
def test_no_array_a_grad_kernel_returned_is_written_into(monkeypatch, graph):
    """A gradient kernel may hand the same array to two inputs (an add's, unbroadcast):
    a sum's first part is kept as it is, the second makes a new array, and only that one
    takes later parts in place, for the units' gradients and the leaves' alike (here every
    grad kernel's outputs are read-only: an add into one raises)."""
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
    w, u = weights()
    run, arguments = {
        "sequences": (step, [((w, u), sequences(5, seed)) for seed in (1, 2, 3)]),
        "one weight twice": (step, [((w, w), sequences(5, seed)) for seed in (1, 2, 3)]),
        "sequences of several lengths": (step, [((w, u), ragged(seed)) for seed in (1, 2, 3)]),
        "forest": (forest_step, [((w, u, weights(seed=5)[0]), TREES, seed)
                                 for seed in (1, 2, 3)])}[graph]
    cached_runs(monkeypatch, run, arguments)
