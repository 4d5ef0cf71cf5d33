"""The batched backward of a cached unit graph (``tape.unit_schedule``): what its first cached
run finds about the graph's units and gradient routes is given out by later runs, and every
run's loss, gradients and held values stay bit for bit the uncached unit path's."""
from operator import itemgetter

import numpy as np
import test_unit_schedule
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_schedule import (
    TREES,
    assert_same,
    forest_step,
    sequences,
    step,
    uncached,
    weights,
)

from tape import Variable, batched_backward, batched_grads, lazy_replay
from tape.unit_schedule import UnitSchedule


def the_schedule():
    """The one UnitSchedule the test's graph made."""
    schedule, = next(e for e in lazy_replay._entries.values() if e).programs.values()
    assert type(schedule) is UnitSchedule
    return schedule


def uncached_forest(params, seed):
    """``forest_step`` of ``TREES`` by the uncached unit path."""
    saved = lazy_replay._entries, lazy_replay._seen
    lazy_replay._entries, lazy_replay._seen = {}, set()
    try:
        return forest_step(params, TREES, seed)
    finally:
        lazy_replay._entries, lazy_replay._seen = saved


def with_sample_grads(monkeypatch, run, *args):
    """``run(*args)`` and the gradients of the samples' own leaves (each sequence, each tree
    leaf's input: filed by its op's handle, so by row) as arrays."""
    made = []

    def noting(*a, **k):
        made.append(Variable(*a, **k))
        return made[-1]

    monkeypatch.setattr(test_unit_schedule, "Variable", noting)
    try:
        got = run(*args)
    finally:
        monkeypatch.setattr(test_unit_schedule, "Variable", Variable)
    grads = [v.grad.value().copy() for v in made if v.grad is not None]
    assert len(grads) > 2
    return got, grads


def assert_same_as(monkeypatch, result, run, *args):
    """``result`` (``with_sample_grads``'s) bit for bit that of ``run(*args)``."""
    (got, grads), (expected, expected_grads) = result, with_sample_grads(monkeypatch, run,
                                                                         *args)
    assert_same(got, expected)
    assert len(grads) == len(expected_grads)
    for g, e in zip(grads, expected_grads):
        np.testing.assert_array_equal(g, e)


def counting(monkeypatch, module, name: str) -> list:
    """Count calls of ``module.name`` (one True per call) in the returned list."""
    calls, function = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(True)
        return function(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_units_take_their_handles_by_the_layout_the_first_cached_run_found(monkeypatch):
    """The pass over every handle and record that gives each unit its handles, finds the
    loss's op and orders the units runs on the uncached path and on the schedule's first
    run; later runs take each unit's handles by record position."""
    found = counting(monkeypatch, batched_backward, "_units")
    params = weights()
    for _ in range(2):      # (uncached; uncached, keeping its turns)
        step(params, sequences(5))
    assert len(found) == 2
    before = lazy_replay.unit_replays
    results = [with_sample_grads(monkeypatch, step, params, sequences(5, seed))
               for seed in (1, 2, 3)]
    assert lazy_replay.unit_replays == before + 3 and len(found) == 3
    layout = the_schedule().layout
    # (positions only: no handle, unit or value kept across steps)
    assert all(type(first) is int and type(take) is itemgetter for first, take in layout.order)
    assert all(type(n) is int for n in layout.seed)
    for seed, result in zip((1, 2, 3), results):
        assert_same_as(monkeypatch, result, uncached, params, sequences(5, seed))


def test_a_forest_takes_its_handles_by_the_layout_too(monkeypatch):
    """Batches of every size (a forest's depths: 1 to all leaves), each unit's handles spread
    over the trees' stretches of the tape: bit for bit the uncached path, other data too."""
    found = counting(monkeypatch, batched_backward, "_units")
    params = weights() + weights(seed=5)[:1]
    for _ in range(2):
        forest_step(params, TREES)
    before = lazy_replay.unit_replays
    results = [with_sample_grads(monkeypatch, forest_step, params, TREES, seed)
               for seed in (0, 1, 2)]
    assert lazy_replay.unit_replays == before + 3 and len(found) == 3
    for seed, result in zip((0, 1, 2), results):
        assert_same_as(monkeypatch, result, uncached_forest, params, seed)


def test_a_forest_adds_gradient_rows_at_the_index_arrays_its_routes_keep():
    """Where a batch of tree nodes hands gradient rows back to the several batches its
    children came from, each target's way of adding them (``batched_grads.placement``: an
    index array, made once, or a slice) is kept with the route and followed from then on:
    bit for bit the uncached path, with other data too."""
    params = weights() + weights(seed=5)[:1]
    for _ in range(2):
        forest_step(params, TREES)
    results = [forest_step(params, TREES, seed) for seed in (0, 1, 2)]
    routes = [r for turn in the_schedule().filings if turn for r in turn.values()]
    places = [place for targets, _ in routes for _, place, _ in targets]
    assert places and all(type(index) in (slice, np.ndarray, tuple, type(None))
                          for _, _, index, _ in places)
    assert any(type(index) is np.ndarray for _, _, index, _ in places)
    for seed, got in zip((0, 1, 2), results):
        assert_same(got, uncached_forest(params, seed))


def test_one_piece_gradients_go_where_the_first_cached_run_found(monkeypatch):
    """A gradient of one piece goes into one earlier unit's rows (by a kept ``placement``)
    or to the variable every op of the batch shares (by the entry position kept per unit);
    found on the schedule's first run only, then followed: bit for bit the uncached path,
    the sequences' own gradients too."""
    found = counting(monkeypatch, batched_grads, "placement")
    params = weights()
    for _ in range(2):
        step(params, sequences(5))
    uncached_calls = len(found)
    step(params, sequences(5, 2))
    first_run = len(found) - uncached_calls
    assert first_run > 4
    results = [with_sample_grads(monkeypatch, step, params, sequences(5, seed))
               for seed in (3, 4)]
    assert len(found) == uncached_calls + first_run + 2     # (the loss's seed, per run)
    kept = [v for per_unit in the_schedule().layout.kept for v in per_unit.values()]
    assert any(type(v) is int for v in kept)        # (the weights' entry positions)
    assert any(type(v) is tuple and v[1] == batched_grads.WHOLE for v in kept)
    for seed, result in zip((3, 4), results):
        assert_same_as(monkeypatch, result, uncached, params, sequences(5, seed))


def test_kept_placements_hold_their_rows_as_frozensets():
    """A kept placement's rows (which rows of the target unit its gradient reaches) are a
    frozenset, which the unit's ``reached`` set takes faster than a list; a row that some
    gradient reached decides whether an array given to that op gets its part (the
    forest's leaves: compared in ``test_a_forest_takes_its_handles_by_the_layout_too``)."""
    params = weights() + weights(seed=5)[:1]
    for _ in range(3):
        forest_step(params, TREES)
    schedule = the_schedule()
    kept = [v for per_unit in schedule.layout.kept for v in per_unit.values()
            if type(v) is tuple]
    routes = [r for turn in schedule.filings if turn for r in turn.values()]
    places = kept + [place for targets, _ in routes for _, place, _ in targets]
    assert kept and places and all(type(rows) is frozenset for rows, _, _, _ in places)
