"""Cached lazy backward (``tape.lazy_replay``): a graph recorded again runs the program built
from the per-op path's grad ops and fusion groups, with the per-op path's results bit for bit,
and never the program of another graph: a different attribute, shape, dtype, requires-grad
pattern, graph, held intermediate, sharing of a leaf, or an op computed before backward each
run their own."""
import numpy as np
import pytest

import tape
from tape import Variable, lazy_replay, ops


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(lazy_replay, "_entries", {})
    monkeypatch.setattr(lazy_replay, "_seen", set())


def arrays(shape=(3, 5), count=2, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 2.0, shape).astype(dtype) for _ in range(count)]


def chain(x, c, factor=1.0001):
    """Forward values read by the gradients (mul, div, sqrt, square), scale's modes, relu."""
    y = x * factor
    y = y + 0.25
    y = ops.elementwise_mul(y, c)
    y = ops.elementwise_div(y, c + 1.0)
    y = ops.sqrt(ops.square(ops.relu(y)) + 1.0)
    return ops.reduce_sum(y * 0.5 - c, reduce_all=True)


def gradients(fn, values, lazy=True, wants=None, hold=False):
    """The leaves' gradients (and the loss, and a held intermediate's value) of ``fn`` over
    new Variables of ``values``; ``wants`` per value, whether it wants a gradient."""
    wants = wants or [True] * len(values)
    context = tape.lazy() if lazy else _nothing()
    with context:
        tape.reset_global_tape()
        xs = [v if isinstance(v, Variable) else Variable(v.copy(), stop_gradient=not w)
              for v, w in zip(values, wants)]
        held = []
        loss = fn(*xs, held) if hold else fn(*xs)
        loss.backward()
        grads = [None if x.grad is None else x.grad.value().copy() for x in xs]
        return grads, loss.value().copy(), [h.value().copy() for h in held]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False


def same(got, expected):
    (g1, l1, h1), (g2, l2, h2) = got, expected
    assert len(g1) == len(g2) and len(h1) == len(h2)
    for a, b in zip(g1 + [l1] + h1, g2 + [l2] + h2):
        if a is None or b is None:
            assert a is None and b is None
        else:
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def per_op(fn, values, **kw):
    """What the per-op path gives (a graph seen for the first time runs it)."""
    saved, seen = dict(lazy_replay._entries), set(lazy_replay._seen)
    lazy_replay._entries.clear()
    lazy_replay._seen.clear()
    try:
        return gradients(fn, values, **kw)
    finally:
        lazy_replay._entries.clear()
        lazy_replay._entries.update(saved)
        lazy_replay._seen.clear()
        lazy_replay._seen.update(seen)


def warm(fn, values, **kw):
    """Run ``fn``'s backward three times, a program serving the third at the latest; the
    results of each run."""
    results = []
    for _ in range(3):
        before = lazy_replay.replays
        results.append(gradients(fn, values, **kw))
    assert lazy_replay.replays == before + 1, "the third backward was not a cached program's"
    return results


def test_a_recorded_graph_runs_its_cached_program_with_the_per_op_results(kernel_calls):  # noqa: F811
    values = arrays()
    first, built, replayed = warm(chain, values)
    same(built, first)
    same(replayed, first)
    eager = gradients(chain, values, lazy=False)
    for got, expected in zip(replayed[0], eager[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    # the program runs what the build ran, fused at any size (the per-op path leaves arrays
    # this small to single kernels)
    lazy_replay._entries.clear()
    lazy_replay._seen.clear()
    runs = []
    for _ in range(3):
        del kernel_calls[:]
        gradients(chain, values)
        runs.append(list(kernel_calls))
    per_op_calls, built_calls, replayed_calls = runs
    assert "fused" not in per_op_calls and "fused" in built_calls
    assert replayed_calls == built_calls and len(built_calls) < len(per_op_calls)


def test_new_leaf_values_are_gathered_each_time():
    warm(chain, arrays())
    for seed in (1, 2):
        values = arrays(seed=seed)
        before = lazy_replay.replays
        got = gradients(chain, values)
        assert lazy_replay.replays == before + 1
        same(got, per_op(chain, values))


def product(x, c):
    return ops.reduce_sum(ops.elementwise_mul(x * 2.0, c) + x, reduce_all=True)


@pytest.mark.parametrize("change", ["attribute", "shape", "dtype", "requires_grad", "graph"])
def test_a_different_graph_never_runs_the_cached_program(change):
    values = arrays()
    warm(product, values)
    fn, kw = product, {}
    if change == "attribute":
        def fn(x, c):
            return ops.reduce_sum(ops.elementwise_mul(x * 2.5, c) + x, reduce_all=True)
    elif change == "shape":
        values = arrays((5, 3))
    elif change == "dtype":
        values = arrays(dtype=np.float64)
    elif change == "requires_grad":
        kw = {"wants": [True, False]}
    else:
        def fn(x, c):
            return ops.reduce_sum(ops.elementwise_add(x * 2.0, c) + x, reduce_all=True)
    before = lazy_replay.replays
    got = gradients(fn, values, **kw)
    assert lazy_replay.replays == before     # (a new signature: seen once)
    same(got, per_op(fn, values, **kw))
    warm(fn, values, **kw)
    same(gradients(fn, values, **kw), per_op(fn, values, **kw))
    warm(product, arrays())


def wired(x, c, wiring="as_recorded"):
    """The same ops, plans and record positions whatever ``wiring`` says (so the same key in
    ``lazy_replay``), but read from elsewhere: the second op reads the leaf instead of the
    first op's output ("leaf"), the product reads the second op's output ("reader"), every
    reader of the first op reads its twin, recorded after it ("position"), or the sum reads
    another output of the split ("output")."""
    a = x * 2.0
    twin = x * 2.0
    if wiring == "position":
        a = twin
    b = (x if wiring == "leaf" else a) * 3.0
    m = ops.elementwise_mul(b if wiring == "reader" else a, c)
    rows = ops.split(m, num=3, axis=0)
    return ops.reduce_sum(b + rows[2 if wiring == "output" else 0], reduce_all=True)


@pytest.mark.parametrize("cached, wiring", [("as_recorded", "leaf"), ("leaf", "as_recorded"),
                                            ("as_recorded", "reader"),
                                            ("as_recorded", "position"),
                                            ("as_recorded", "output")])
def test_the_same_ops_wired_otherwise_never_run_the_cached_program(cached, wiring):
    values = arrays()

    def first(x, c):
        return wired(x, c, cached)

    def rewired(x, c):
        return wired(x, c, wiring)
    warm(first, values)
    for _ in range(3):
        before = lazy_replay.replays
        got = gradients(rewired, values)
        assert lazy_replay.replays == before
        same(got, per_op(rewired, values))
    before = lazy_replay.replays
    same(gradients(first, values), per_op(first, values))
    assert lazy_replay.replays == before + 1


def test_leaves_swapped_are_the_same_graph_with_other_values():
    values = arrays()
    warm(product, values)

    def swapped(x, c):
        return product(c, x)
    before = lazy_replay.replays
    got = gradients(swapped, values)
    assert lazy_replay.replays == before + 1
    same(got, per_op(swapped, values))


def test_a_graph_reading_an_unrecorded_op_is_never_cached():
    """``c + 1.0`` on a leaf that wants no gradient is not on the tape's records: the graph
    has no key, and every backward takes the per-op path."""
    values = arrays()
    before = lazy_replay.replays
    for _ in range(3):
        got = gradients(chain, values, wants=[True, False])
    assert lazy_replay.replays == before
    same(got, per_op(chain, values, wants=[True, False]))


def held_chain(x, c, held, keep=True):
    y = ops.elementwise_mul(x * 2.0 + 1.0, c)
    if keep:
        held.append(y)
    y = ops.sqrt(ops.square(y) + 0.5)
    return ops.reduce_sum(y, reduce_all=True)


def test_a_held_intermediate_is_stored_whichever_state_was_cached():
    values = arrays()

    def dropped(x, c, held):
        return held_chain(x, c, held, keep=False)
    warm(dropped, values, hold=True)
    got = gradients(held_chain, values, hold=True)      # same graph, one value held
    expected = per_op(held_chain, values, hold=True)
    same(got, expected)
    assert len(got[2]) == 1
    warm(held_chain, values, hold=True)
    same(gradients(held_chain, values, hold=True), expected)
    same(gradients(dropped, values, hold=True), per_op(dropped, values, hold=True))


def test_a_leaf_shared_differently_runs_its_own_program():
    x_np, c_np = arrays()

    def product(x, y):
        return ops.reduce_sum(ops.elementwise_mul(x * 3.0, y) + x, reduce_all=True)
    two = [x_np, x_np.copy()]
    warm(product, two)
    shared = Variable(x_np.copy(), stop_gradient=False)
    before = lazy_replay.replays
    got = gradients(product, [shared, shared])
    expected = per_op(product, [Variable(x_np.copy(), stop_gradient=False)] * 2)
    same(got, expected)
    np.testing.assert_array_equal(got[0][0], x_np * 3.0 + x_np * 3.0 + 1.0)
    del before


def test_an_op_computed_before_backward_takes_the_per_op_path():
    values = arrays()
    warm(chain, values)

    def asked(x, c):
        y = x * 1.0001
        y.value()   # (this op ran: the recorded graph is not the cached one's state)
        y = y + 0.25
        y = ops.elementwise_mul(y, c)
        y = ops.elementwise_div(y, c + 1.0)
        y = ops.sqrt(ops.square(ops.relu(y)) + 1.0)
        return ops.reduce_sum(y * 0.5 - c, reduce_all=True)
    before = lazy_replay.replays
    same(gradients(asked, values), per_op(asked, values))
    assert lazy_replay.replays == before


def test_gradients_add_to_a_leaf_gradient_already_there():
    """Two backwards into the same leaves without clearing them: the second adds, as the
    per-op path does."""
    x_np, c_np = arrays()

    def twice(fn_values):
        x, c = (Variable(v.copy(), stop_gradient=False) for v in fn_values)
        for _ in range(2):
            with tape.lazy():
                tape.reset_global_tape()
                product(x, c).backward()
        return [x.grad.value(), c.grad.value()]
    warm(product, [x_np, c_np])
    before = lazy_replay.replays
    got = twice([x_np, c_np])
    assert lazy_replay.replays == before + 2
    lazy_replay._entries.clear()
    lazy_replay._seen.clear()
    expected = twice([x_np, c_np])      # (first sighting, then a build: the per-op path's)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_a_graph_whose_ops_could_batch_is_refused_before_small_arrays_are_fused(monkeypatch):
    """Two independent ops of one signature (the scheduler would batch them) keep the per-op
    path; refusing them must not first group small arrays into loops, which only a program
    uses and which take seconds to compile."""
    from tape import lazy_program

    smalls = []
    real = lazy_program.fuse_chains

    def spy(needed, small=False):
        smalls.append(small)
        return real(needed, small=small)

    monkeypatch.setattr(lazy_program, "fuse_chains", spy)

    def twins(x, y):
        return ops.reduce_sum(ops.relu(x) * 2.0 + ops.relu(y) * 2.0, reduce_all=True)

    values = arrays()
    expected = per_op(twins, values)
    before = lazy_replay.replays
    for _ in range(3):
        same(gradients(twins, values), expected)
    assert lazy_replay.replays == before
    assert not any(smalls)


def test_a_chain_program_stores_only_the_values_read_outside_its_loops(monkeypatch):
    """Fusion stores a value when anything outside its loop holds it (reference counts), so
    building a program must hold no op of its own: the 40 grad ops of a scale chain (none reads
    a forward value) are one loop that stores the leaf's gradient alone (40 values when
    something held every op)."""
    from tape import lazy_program
    from tape.fusion import FusedGroup

    stored = []
    real = lazy_program.fuse_chains

    def spy(needed, small=False):
        nodes = real(needed, small=small)
        if small:
            stored.append(sum(len(n.program[1]) for n in nodes if type(n) is FusedGroup))
        return nodes

    monkeypatch.setattr(lazy_program, "fuse_chains", spy)

    def long_chain(x):
        y = x
        for _ in range(20):
            y = y * 1.0001
            y = y + 0.0001
        return ops.reduce_sum(y, reduce_all=True)

    warm(long_chain, arrays(count=1))
    assert stored == [1]
