"""The cached forward of a unit schedule (``batching.run_turns``): what each batch's first run
by the kept turns keeps for the later ones (``batch_inputs.BatchRecipes``: its ops' places,
where their rows start, where they are on the tape) and the sources its inputs were gathered
with (``units._sources``). Results bit for bit the uncached unit path's."""
import numpy as np
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_schedule import SAMPLES, WIDTH, assert_same, sequences, step, uncached, weights

import tape
from tape import Variable, batch_inputs, batching, lazy_replay, ops, units
from tape.batch_inputs import BatchRecipes
from tape.pending import LazyOp


def kept_batches() -> list:
    """The BatchRecipes of the one unit schedule the caches hold."""
    schedule, = next(e for e in lazy_replay._entries.values() if e).programs.values()
    return [kept for kept in schedule.recipes if kept is not None]


def training_step(params, losses_of):
    """One lazy training step whose loss is the mean of ``losses_of(*params)``; returns as
    ``test_unit_schedule.step`` does (no held values)."""
    with tape.lazy():
        tape.reset_global_tape()
        losses = losses_of(*params)
        loss = ops.scale(ops.sum(losses), scale=1.0 / len(losses))
        loss.backward()
    grads = [p.grad.value().copy() for p in params]
    for p in params:
        p.grad = None
    return loss.value().copy(), grads, []


def assert_as_uncached(results: list, run, datas: list):
    """Each of ``results`` is ``run(data)`` of its data on a graph never seen before (this
    empties the caches)."""
    for got, data in zip(results, datas):
        lazy_replay._entries.clear()
        lazy_replay._seen.clear()
        assert_same(got, run(data))


def test_a_batch_keeps_only_places_and_recipes():
    params, data = weights(), sequences(5)
    for _ in range(4):
        step(params, data)
    kept = kept_batches()
    assert kept and all(type(k) is BatchRecipes for k in kept)
    for k in kept:
        assert k.offsets is None and all(type(p) is int for p in k.positions)
        assert list(k.positions) == sorted(k.positions)
        picked = k.pick(list(range(1000)))
        assert type(picked) is tuple and all(type(p) is int for p in picked)


def rows_step(params, data):
    """A step whose products batch ops of different row counts (sample ``n`` reads ``n + 1``
    rows): their batch's rows start at ``offsets``."""
    return training_step(params, lambda w, u: [ops.mean(ops.tanh(ops.matmul_v2(ops.tanh(
        ops.matmul_v2(Variable(x, stop_gradient=False), w)), u))) for x in data])


def rows_data(seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, (n + 1, WIDTH)).astype(np.float32) for n in range(SAMPLES)]


def test_a_batch_of_ops_of_different_row_counts_keeps_its_offsets():
    params = weights()
    before = lazy_replay.unit_replays
    results = [rows_step(params, rows_data(seed)) for seed in (0, 0, 0, 1, 2)]
    assert lazy_replay.unit_replays == before + 3
    assert any(k.offsets is not None for k in kept_batches())
    assert_as_uncached(results, lambda seed: rows_step(params, rows_data(seed)),
                       [0, 0, 0, 1, 2])


def lazy_ops(records, positions):
    """LazyOps recorded on ``records`` at ``positions`` (None: on no tape)."""
    made = []
    for p in positions:
        op = LazyOp(None, {}, None)
        op.record = None if p is None else (records, p)
        made.append(op)
    return made


def test_in_order_positions_only_for_ops_in_order_on_one_tape():
    records, other = [None] * 8, [None] * 8
    assert units.in_order_positions(lazy_ops(records, [1, 4, 6])) == [1, 4, 6]
    assert units.in_order_positions(lazy_ops(records, [1, 6, 4])) is None
    assert units.in_order_positions(lazy_ops(records, [1, 1])) is None
    assert units.in_order_positions(lazy_ops(records, [1, None])) is None
    assert units.in_order_positions(lazy_ops(records, [None, 1])) is None
    mixed = lazy_ops(records, [1]) + lazy_ops(other, [4])
    assert units.in_order_positions(mixed) is None
    assert units.in_order_positions(lazy_ops(records[:4], [1, 4])) is None   # (consumed)


def per_place(sources: dict) -> dict:
    """``Unit.sources`` as ``{(slot, index): {op place: (unit, output, index, row) or None}}``
    (None: an array given to that op), however its pieces group the rows."""
    found = {}
    for key, pieces in sources.items():
        places = found[key] = {}
        for piece in pieces:
            if piece[0] is None:
                places[piece[1]] = None
            else:
                unit, k, j, rows, at = piece
                places.update((p, (unit, k, j, r)) for r, p in zip(rows, at))
    return found


def test_the_sources_a_batch_gathered_are_the_sources_its_ops_tell(monkeypatch):
    """Where a batch gathered every input that wants a gradient (shared arrays too), its
    unit takes those pieces as they are: the same as found from its ops' arguments, on the
    uncached path and by the schedule."""
    note_unit, compared = batching.note_unit, []

    def comparing(ops, ins, arrays, results, offsets=None, stacked_plan=None, batch=None,
                  gathered=None, filings=None, positions=None):
        if gathered is not None and ops[0].plan.requires_grad:
            expected = units._sources(ops, ops[0].plan, ins)
            got = units._sources(ops, ops[0].plan, ins, dict(gathered))
            assert per_place(got) == per_place(expected)
            shared = any(ins.get(slot) == "shared" for slot, _ in expected)
            compared.append((gathered.keys() == expected.keys(), shared))
        return note_unit(ops, ins, arrays, results, offsets, stacked_plan, batch, gathered,
                         filings, positions)

    monkeypatch.setattr(batching, "note_unit", comparing)
    params, data = weights(), sequences(4)
    for _ in range(4):
        step(params, data)
    assert lazy_replay.unit_replays >= 1 and (True, True) in compared
    assert_same(step(params, data), uncached(params, data))
    before = lazy_replay.unit_replays
    results = [shared_step(params, data) for _ in range(4)]
    assert lazy_replay.unit_replays == before + 2 and (False, True) in compared
    assert_as_uncached(results, lambda data: shared_step(params, data), [data] * 4)


def shared_step(params, data):
    """A step whose products share a weight computed on the tape (a ref, not an array;
    the samples' first ops are ready with it, so that backward goes by units)."""
    def losses(w, u):
        half = ops.scale(w, scale=0.5)
        return [ops.mean(ops.tanh(ops.matmul_v2(ops.tanh(ops.matmul_v2(
            ops.tanh(Variable(x, stop_gradient=False)), half)), u))) for x in data]
    return training_step(params, losses)


def test_a_source_without_a_unit_leaves_the_unit_without_sources():
    """A piece None (an input read from an op that ran without a unit) makes the unit's
    sources None, gathered or not: backward then does not go by units."""
    records = [None] * 4
    op, = lazy_ops(records, [0])
    plan = type("Plan", (), {"wants_grad": {"X": (True,), "Y": (True,)}})()
    op.plan, op.args = plan, {"X": np.zeros(1), "Y": np.zeros(1)}
    ins = {"X": "cat", "Y": "shared"}
    gathered = {("X", 0): [None], ("Y", 0): [(None, 0)]}
    assert units._sources([op], plan, ins, gathered) is None
    gathered[("X", 0)] = [(None, 0)]
    assert units._sources([op], plan, ins, gathered) is gathered


def test_a_whole_earlier_output_is_passed_as_it_is(monkeypatch):
    """An input whose rows are all of an earlier batch's output, in order (a sequence's h of
    step t: the batch of step t - 1), is that output itself on the cached path, as on the
    uncached one: no copy."""
    again, passed = batch_inputs.gathered_again, []

    def noting(recipe, ops, slot, concatenate, index=-1, sources=None):
        value = again(recipe, ops, slot, concatenate, index, sources)
        groups, singles = recipe
        if not singles and len(groups) == 1 and groups[0][2]:
            places = groups[0][1]
            a = ops[places[0]].args[slot]
            d, k, j = a if index < 0 else a[index]
            passed.append(value is (d.results[k] if j < 0 else d.results[k][j]))
        return value

    params, data = weights(), sequences(5)
    for _ in range(3):
        step(params, data)
    groups = [g for k in kept_batches() for groups, _ in k.values() for g in groups]
    assert any(whole for *_, whole in groups) and not all(whole for *_, whole in groups)
    monkeypatch.setattr(batch_inputs, "gathered_again", noting)
    before = lazy_replay.unit_replays
    got = step(params, data)
    assert lazy_replay.unit_replays == before + 1
    assert len(passed) == sum(whole for *_, whole in groups) and all(passed)
    assert_same(got, uncached(params, data))


def alone_step(params, data):
    """A step whose products read, per sample, the output of an op that ran alone (a scale by
    the sample's own factor: no batch), each op's rows read one by one; the split before them
    reads arrays given to each op."""
    def losses(w, u):
        return [ops.mean(ops.tanh(ops.matmul_v2(ops.matmul_v2(ops.scale(ops.tanh(ops.split(
            Variable(x, stop_gradient=False), num=2, axis=0)[0]), scale=1.0 + n), w), u)))
            for n, x in enumerate(data)]
    return training_step(params, losses)


def test_ops_read_alone_are_gathered_as_given_or_read():
    """Where every op of a batch reads its input alone, the arrays given to them are
    concatenated as they are; the outputs of ops that ran alone are read."""
    params = weights()
    before = lazy_replay.unit_replays
    results = [alone_step(params, sequences(2, seed)) for seed in (1, 1, 1, 2)]
    assert lazy_replay.unit_replays == before + 2
    recipes = [r for k in kept_batches() for r in k.values()]
    assert sum(not groups and len(singles) == SAMPLES for groups, singles in recipes) >= 2
    assert_as_uncached(results, lambda seed: alone_step(params, sequences(2, seed)),
                       [1, 1, 1, 2])
