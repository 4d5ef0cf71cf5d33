"""What the written forward of a unit schedule (``tape.unit_forward``) leaves out when the
written backward follows: the units' sources and filings, the records of a batch's ops past
its first, the ops' ``unit``; none has a reader then, and where the generic batched backward
follows instead (the backward not written) each is made as before. A stacked batch is
written with its blocks' shapes and plan, found once. Results bit for bit the uncached
path's throughout."""
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_schedule import SAMPLES, assert_same, sequences, step, uncached, weights
from test_unit_written import schedules

from tape import Variable, batch_rules, batching, unit_forward, unit_schedule


def watch_written_backward(monkeypatch) -> list:
    """A list that gets, per later run of the (one) schedule's written backward, the tape's
    records and the lazy ops whose values its handles keep, as the written forward left
    them."""
    layout = schedules()[0].layout
    written, seen = layout.written, []

    def backward(handles, records, invoke, release):
        refs = [getattr(e, "_lazy", None) for h in handles for e in h.entries
                if type(e) is Variable]     # (a slot an eager Variable leaves unset)
        ops = {id(ref[0]): ref[0] for ref in refs if ref is not None}
        seen.append((list(records), list(ops.values())))
        return written(handles, records, invoke, release)
    monkeypatch.setattr(layout, "written", backward)
    return seen


def test_before_the_written_backward_a_batch_is_filed_once_without_sources(monkeypatch):
    params, data = weights(), sequences(5)
    for _ in range(4):
        step(params, data)
    assert callable(schedules()[0].layout.written)
    seen = watch_written_backward(monkeypatch)
    before = unit_forward.written
    got = step(params, data)
    assert unit_forward.written == before + 1
    (records, ops), = seen
    units = [unit for unit in records if unit is not None]
    assert len({id(unit) for unit in units}) == len(units)     # (each unit filed once)
    batches = [unit for unit in units if unit.size > 1]
    assert any(unit.size == SAMPLES for unit in batches)
    assert all(unit.sources is None and unit.filings is None for unit in batches)
    batched = [op for op in ops if op.batch is not None]
    assert batched and all(op.unit is None for op in batched)
    assert_same(got, uncached(params, data))


def test_the_generic_backward_after_the_written_forward_finds_what_it_reads(monkeypatch):
    """The backward not written (``HandleLayout.written`` False): the written forward gives
    the units their sources and the ops their units (a lone op's sources name them), which
    the generic batched backward reads."""
    monkeypatch.setattr(unit_schedule, "write_backward", lambda *args: None)
    params = weights()
    before = unit_forward.written
    seeds = (1, 1, 1, 1, 1, 2)
    results = [step(params, sequences(5, seed)) for seed in seeds]
    assert unit_forward.written == before + 2
    assert schedules()[0].layout.written is False
    for seed, got in zip(seeds, results):
        assert_same(got, uncached(params, sequences(5, seed)))


def test_a_stacked_batch_is_written_with_the_blocks_and_plan_it_had(monkeypatch):
    """Each sequence's concat of its h's and its mean run stacked: the written forward
    reshapes their inputs to the blocks the run it was written from made, and names the
    stacked plan that run found, asking ``stacked_plan`` for none."""
    params, data = weights(), sequences(5)
    for _ in range(4):
        step(params, data)
    stacked_plan, asked = batch_rules.stacked_plan, []

    def counted(*args):
        asked.append(args)
        return stacked_plan(*args)
    monkeypatch.setattr(batch_rules, "stacked_plan", counted)
    before = unit_forward.written
    results = [step(params, data) for _ in range(2)]
    assert unit_forward.written == before + 2 and not asked
    for got in results:
        assert_same(got, uncached(params, data))
    assert asked    # (the uncached path stacks the same batches)


def test_before_the_written_backward_a_lone_op_runs_written(monkeypatch):
    """The loss's sum of the sequences' means and its scale run alone: where the written
    backward follows, the written forward calls their kernels on their inputs as
    ``arrays_of`` reads them (each mean's block of its stacked batch) and files their
    units, noting none by ``note_unit``; each keeps the fields ``run_one`` leaves it but its
    ``unit``."""
    params, data = weights(), sequences(5)
    for _ in range(4):
        step(params, data)
    note_unit, noted = batching.note_unit, []

    def counted(ops, *args):
        noted.append(ops)
        return note_unit(ops, *args)
    monkeypatch.setattr(batching, "note_unit", counted)
    run_written, ran = unit_schedule.run_written, []

    def watched(forward, ops, *args):
        ran.extend(ops)
        run_written(forward, ops, *args)
    monkeypatch.setattr(unit_schedule, "run_written", watched)
    before = unit_forward.written
    got = step(params, data)
    lone = [op for op in ran if op.batch is None]
    assert unit_forward.written == before + 1 and not noted
    assert sorted(op.plan.info.type for op in lone) == ["scale", "sum"]
    # (the fields run_one leaves, but the unit: none reads it, as a batch op's)
    assert all(op.results is not None and op.row == 0 and op.record is None and
               op.unit is None and op.args is None for op in lone)
    assert_same(got, uncached(params, data))
    assert noted    # (the uncached path notes its lone ops' units)
