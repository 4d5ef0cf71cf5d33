"""Cached execution of a lazy graph that goes by units (``tape.unit_schedule``): from the third
backward of the same graph in the same state, the forward batches run in the kept turns (no
prune walk, agenda or signatures) and the batched backward follows; forward values and
gradients bit for bit those of the uncached unit path, with other data too, and a graph of
another structure never runs the schedule."""
import gc
import weakref

import numpy as np
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)

import tape
from tape import Variable, batched_backward, batched_grads, batching, lazy_replay, ops
from tape.unit_schedule import UnitSchedule

SAMPLES, WIDTH = 6, 4


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return [Variable(rng.uniform(-0.5, 0.5, (WIDTH, WIDTH)).astype(np.float32),
                     stop_gradient=False) for _ in range(2)]


def sequences(length, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, (length, WIDTH)).astype(np.float32)
            for _ in range(SAMPLES)]


def step(params, data, held=None, only=None):
    """One lazy training step over ``SAMPLES`` separate sequences: ``h = tanh(x W + h U)``
    per character, each sequence's loss the mean of its h's; the loss their mean. Returns
    the loss, the leaves' gradients and the values of ``held`` intermediates (one of each
    sequence, or of sequence ``only``), as arrays."""
    w, u = params
    with tape.lazy():
        tape.reset_global_tape()
        losses = []
        for n, sequence in enumerate(data):
            # (a sequence that wants a gradient: its split is recorded, so the walker
            # reaches every op on the tape)
            xs = ops.split(Variable(sequence, stop_gradient=False), num=len(sequence), axis=0)
            h = ops.tanh(ops.matmul_v2(xs[0], w))
            hs = [h]
            for x in xs[1:]:
                a = ops.matmul_v2(x, w) + ops.matmul_v2(h, u)
                if held is not None and len(hs) == 2 and only in (None, n):
                    held.append(a)  # (no handle keeps it: held, another state)
                h = ops.tanh(a)
                hs.append(h)
            losses.append(ops.mean(ops.concat(hs, axis=0)))
        loss = ops.scale(ops.sum(losses), scale=1.0 / len(losses))
        loss.backward()
    grads = [p.grad.value().copy() for p in params]
    for p in params:
        p.grad = None
    return loss.value().copy(), grads, [h.value().copy() for h in held or ()]


def uncached(params, data, held=None, only=None):
    """``step`` by the uncached unit path: its graph never seen before."""
    saved = lazy_replay._entries, lazy_replay._seen
    lazy_replay._entries, lazy_replay._seen = {}, set()
    try:
        return step(params, data, held, only)
    finally:
        lazy_replay._entries, lazy_replay._seen = saved


def assert_same(got, expected):
    (loss, grads, held), (loss_e, grads_e, held_e) = got, expected
    np.testing.assert_array_equal(loss, loss_e)
    assert len(grads) == len(grads_e) and len(held) == len(held_e)
    for g, e in zip(grads + held, grads_e + held_e):
        np.testing.assert_array_equal(g, e)


def test_from_the_third_backward_the_kept_turns_run_bit_for_bit():
    params, data = weights(), sequences(5)
    before = lazy_replay.unit_replays
    results = [step(params, data) for _ in range(5)]
    assert lazy_replay.unit_replays == before + 3
    expected = uncached(params, data)
    for got in results:
        assert_same(got, expected)
    entry = next(e for e in lazy_replay._entries.values() if e is not None)
    schedule, = entry.programs.values()
    assert type(schedule) is UnitSchedule
    # (the schedule holds positions only: no array, op or unit across steps)
    assert all(type(t) is int or all(type(i) is int for i in t) for t in schedule.turns)
    assert any(type(t) is tuple and len(t) == SAMPLES for t in schedule.turns)


def test_other_data_of_the_same_structure_run_the_schedule():
    params = weights()
    for seed in (1, 1, 1):
        step(params, sequences(5, seed))
    for seed in (2, 3):
        before = lazy_replay.unit_replays
        got = step(params, sequences(5, seed))
        assert lazy_replay.unit_replays == before + 1
        assert_same(got, uncached(params, sequences(5, seed)))
    new = weights(seed=7)   # other leaf arrays, shared the same way
    before = lazy_replay.unit_replays
    got = step(new, sequences(5, 4))
    assert lazy_replay.unit_replays == before + 1
    assert_same(got, uncached(new, sequences(5, 4)))


def test_another_structure_or_state_never_runs_the_schedule():
    params = weights()
    for _ in range(3):
        step(params, sequences(5))
    before = lazy_replay.unit_replays
    longer = step(params, sequences(6))     # another sequence length: another signature
    assert lazy_replay.unit_replays == before
    assert_same(longer, uncached(params, sequences(6)))
    held = []   # the same graph, an intermediate per sequence held: another state
    got = step(params, sequences(5), held)
    assert lazy_replay.unit_replays == before and len(held) == SAMPLES
    assert_same(got, uncached(params, sequences(5), []))
    w, _ = params   # one weight in both places: another pattern of leaves
    got = step((w, w), sequences(5))
    assert lazy_replay.unit_replays == before
    assert_same(got, uncached((w, w), sequences(5)))


def test_held_intermediates_get_their_values_from_the_schedule():
    params = weights()
    for _ in range(2):
        step(params, sequences(5), [])
    before = lazy_replay.unit_replays
    got = step(params, sequences(5, seed=3), [])
    assert lazy_replay.unit_replays == before + 1
    assert len(got[2]) == SAMPLES
    assert_same(got, uncached(params, sequences(5, seed=3), []))


def test_a_changed_fusion_threshold_falls_back(monkeypatch):
    params, data = weights(), sequences(5)
    for _ in range(3):
        step(params, data)
    from tape import fusion_steps
    monkeypatch.setattr(fusion_steps, "MIN_ELEMENTS", fusion_steps.MIN_ELEMENTS + 1)
    before = lazy_replay.unit_replays
    got = step(params, data)
    assert lazy_replay.unit_replays == before
    assert_same(got, uncached(params, data))


def test_values_go_as_backward_consumes_them(monkeypatch):
    """As each unit is done, as many of the arrays the step's kernels were given or made are
    still alive in the cached run as in the uncached one (nothing the schedule holds keeps
    one longer); after backward none is."""
    params, data = weights(), sequences(5)
    invoke, release = batching.invoke, batched_backward._release
    made, alive = [], []

    def noting(plan, arrays, wants=None, names=None):
        results = invoke(plan, arrays, wants, names)
        given = [a for a in arrays.values() if type(a) is np.ndarray and a.base is None and
                 all(a is not p._value for p in params)]
        made.extend(weakref.ref(a) for a in (*given, *results) if type(a) is np.ndarray)
        return results

    def releasing(unit):
        release(unit)
        alive[-1].append(sum(r() is not None for r in made))

    monkeypatch.setattr(batching, "invoke", noting)
    monkeypatch.setattr(batched_backward, "_release", releasing)
    for _ in range(4):     # (uncached, uncached keeping its turns, cached, cached)
        made.clear()
        alive.append([])
        step(params, data)
        gc.collect()
        assert made and all(r() is None for r in made)
    assert lazy_replay.unit_replays >= 2 and alive[0] == alive[1] == alive[2] == alive[3]


TREES = [((0, 1), 2), (0, (1, (2, 3))), ((0, 1), (2, 3)), (0, 1), (((0, 1), 2), 3),
         (0, (1, 2))]


def forest_step(params, trees, seed=0):
    """A Tree-LSTM-like step over ``trees`` (nested pairs of leaf indices): leaves
    ``tanh(x W)``, nodes ``tanh(l U + r V)``, so that a batch of nodes reads its children
    from leaves and nodes of several depths, interleaved. Returns as ``step`` does."""
    w, u, v = params
    rng = np.random.default_rng(seed)

    def node(tree):
        if isinstance(tree, int):
            x = Variable(rng.uniform(-1.0, 1.0, (1, WIDTH)).astype(np.float32),
                         stop_gradient=False)
            return ops.tanh(ops.matmul_v2(x, w))
        left, right = node(tree[0]), node(tree[1])
        return ops.tanh(ops.matmul_v2(left, u) + ops.matmul_v2(right, v))

    with tape.lazy():
        tape.reset_global_tape()
        loss = ops.mean(ops.concat([node(tree) for tree in trees], axis=0))
        loss.backward()
    grads = [p.grad.value().copy() for p in params]
    for p in params:
        p.grad = None
    return loss.value().copy(), grads, []


def test_a_forest_reads_the_rows_of_several_batches_by_its_recipes():
    params = weights() + weights(seed=5)[:1]
    before = lazy_replay.unit_replays
    results = [forest_step(params, TREES, seed) for seed in (0, 0, 0, 1, 2)]
    assert lazy_replay.unit_replays == before + 3
    saved = lazy_replay._entries, lazy_replay._seen
    lazy_replay._entries, lazy_replay._seen = {}, set()
    try:
        for seed, got in zip((0, 0, 0, 1, 2), results):
            assert_same(got, forest_step(params, TREES, seed))
            lazy_replay._entries.clear()
            lazy_replay._seen.clear()
    finally:
        lazy_replay._entries, lazy_replay._seen = saved
    schedule, = next(e for e in lazy_replay._entries.values() if e).programs.values()
    recipes = [r for turn in schedule.recipes if turn for r in turn.values()]
    assert any(len(groups) > 1 for groups, _ in recipes)       # (children of several batches)
    assert any(singles for _, singles in recipes)              # (arrays given to each op)
    before = lazy_replay.unit_replays
    other = [TREES[1]] + TREES[1:]      # another forest: another graph, uncached
    forest_step(params, other)
    assert lazy_replay.unit_replays == before



def test_a_forest_files_its_gradients_by_the_routes_its_first_cached_run_kept(monkeypatch):
    """Where a batch's input gradient goes to several places (children of several batches,
    arrays given to each op) is found per run on the uncached path, found once on the
    schedule's first run and kept, and followed from then on: bit for bit the uncached
    path, with other data too."""
    params = weights() + weights(seed=5)[:1]
    route, found = batched_grads._route, []

    def finding(unit, pieces, g):
        found.append(unit.filings is not None)
        return route(unit, pieces, g)

    monkeypatch.setattr(batched_grads, "_route", finding)
    forest_step(params, TREES)      # (uncached; then uncached, keeping its turns)
    forest_step(params, TREES)
    assert found and not any(found)
    found.clear()
    before = lazy_replay.unit_replays
    results = [forest_step(params, TREES, seed) for seed in (0, 1, 2)]
    assert lazy_replay.unit_replays == before + 3
    assert len(found) > 4 and all(found)        # (the first cached run only)
    schedule, = next(e for e in lazy_replay._entries.values() if e).programs.values()
    routes = [r for turn in schedule.filings if turn for r in turn.values()]
    assert len(routes) == len(found)
    parts = [type(part) for targets, _ in routes for _, _, part in targets]
    assert slice in parts and np.ndarray in parts   # (children in and out of op order)
    assert any(singles for _, singles in routes)
    lazy_replay._entries, lazy_replay._seen = {}, set()     # (fresh_cache restores them)
    for seed, got in zip((0, 1, 2), results):
        assert_same(got, forest_step(params, TREES, seed))
        lazy_replay._entries.clear()
        lazy_replay._seen.clear()

def test_a_graph_in_more_states_than_are_kept_stops_walking(monkeypatch):
    """Holding another sequence's intermediate is another state; past ``_MAX_PROGRAMS``
    schedules the graph is refused (no walker from then on, as before graphs that go by units
    had schedules), and every step's results stay the uncached path's."""
    monkeypatch.setattr(lazy_replay, "_MAX_PROGRAMS", 2)
    params, data = weights(), sequences(3)
    walked = []
    new_walker = lazy_replay._new_walker

    def noting(entry, *args):
        made = new_walker(entry, *args)
        walk = entry.walk

        def walking(*a):
            walked.append(1)
            return walk(*a)
        entry.walk = walking
        return made
    monkeypatch.setattr(lazy_replay, "_new_walker", noting)
    for only in (0, 0, 0, 1, 1, 1):      # two states, each kept and then run
        step(params, data, [], only)
    assert lazy_replay.unit_replays >= 2 and len(walked) == 5
    signature, = lazy_replay._entries
    got = step(params, data, [], 2)     # a third state: the kept ones are full
    assert lazy_replay._entries[signature] is None and len(walked) == 6
    assert_same(got, uncached(params, data, [], 2))
    step(params, data, [], 0)           # (a kept state: no walker any more)
    assert len(walked) == 6


def test_a_thread_runs_the_schedule_with_its_own_recipes():
    """Which batch's recipes ``run_batch`` follows is per thread (``batching._turn``), as
    the global tape is: a step in a new thread, uncached and cached, gives the same results."""
    import threading
    params, data = weights(), sequences(5)
    for _ in range(3):
        step(params, data)
    results = []
    # (first a graph of its own, uncached: the agenda's batches in a thread that set none)
    thread = threading.Thread(target=lambda: results.extend(
        [step(params, sequences(4)), step(params, data), step(params, data)]))
    before = lazy_replay.unit_replays
    thread.start()
    thread.join()
    assert len(results) == 3 and lazy_replay.unit_replays == before + 2
    assert_same(results[0], uncached(params, sequences(4)))
    for got in results[1:]:
        assert_same(got, uncached(params, data))
