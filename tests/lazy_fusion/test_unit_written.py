"""The cached forward of a unit schedule written out as one function (``tape.unit_forward``):
written by the schedule's first run that follows its recipes (its second), it runs from the
third on; results bit for bit the uncached unit path's, with other data too, for every kind
of batch input it takes; it holds no value, op or unit; values go as backward consumes them
and are there when read after backward; a batch of a kind it does not take leaves the
recipes' path running."""
import numpy as np
import pytest
import test_unit_schedule
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_forward import alone_step, rows_data, rows_step, shared_step, training_step
from test_unit_schedule import TREES, assert_same, forest_step, sequences, step, uncached, weights

from tape import Variable, batch_inputs, batching, lazy_replay, ops, unit_forward, unit_gathers
from tape.pending import LazyOp
from tape.unit_schedule import UnitSchedule
from tape.units import Unit


def schedules() -> list:
    return [s for e in lazy_replay._entries.values() if e for s in e.programs.values()
            if type(s) is UnitSchedule]


def uncached_run(run, data):
    """``run(data)`` on a graph never seen before."""
    saved = lazy_replay._entries, lazy_replay._seen
    lazy_replay._entries, lazy_replay._seen = {}, set()
    try:
        return run(data)
    finally:
        lazy_replay._entries, lazy_replay._seen = saved


def assert_written_as_uncached(run, datas: list):
    """``run(data)`` over ``datas`` (the first three alike: uncached, schedule made, recipes
    found; the fourth writes the forward out): the written forward serves from the fifth,
    and every result is the uncached path's."""
    before = unit_forward.written
    results = [run(data) for data in datas]
    assert unit_forward.written == before + len(datas) - 4
    schedule, = schedules()
    assert callable(schedule.forward)
    for got, data in zip(results, datas):
        assert_same(got, uncached_run(run, data))


def test_the_forward_is_written_by_the_second_run_and_serves_bit_for_bit():
    params = weights()
    assert_written_as_uncached(lambda seed: step(params, sequences(5, seed)),
                               [1, 1, 1, 1, 1, 2, 3])
    new = weights(seed=7)   # other leaf arrays, shared the same way
    before = unit_forward.written
    assert_same(step(new, sequences(5, 4)), uncached(new, sequences(5, 4)))
    assert unit_forward.written == before + 1


def test_another_structure_or_state_never_runs_the_written_forward():
    """``test_unit_schedule``'s graphs of another structure, state or pattern of leaves,
    after the forward was written: each runs the uncached path, bit for bit."""
    for _ in range(2):
        step(weights(), sequences(5))
    before = unit_forward.written
    test_unit_schedule.test_another_structure_or_state_never_runs_the_schedule()
    assert unit_forward.written == before + 1     # (its third step of the written graph)


def test_a_thread_runs_the_written_forward():
    """``test_unit_schedule``'s steps in a new thread, on a graph whose forward is written
    by then: its two cached steps run the written forward, bit for bit."""
    for _ in range(2):
        step(weights(), sequences(5))
    before = unit_forward.written
    test_unit_schedule.test_a_thread_runs_the_schedule_with_its_own_recipes()
    assert unit_forward.written == before + 3


def test_the_written_forward_holds_no_value_op_or_unit():
    params, data = weights(), sequences(5)
    for _ in range(5):
        step(params, data)
    schedule, = schedules()
    forward = schedule.forward
    assert forward.__closure__ is None and forward.__defaults__ is None
    seen = set()
    stack = [v for k, v in forward.__globals__.items() if k != "__builtins__"]
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        assert not isinstance(value, (LazyOp, Unit, Variable)), value
        # (index arrays of gradient routes, ``Unit.filings``: no value)
        assert not isinstance(value, np.ndarray) or value.dtype.kind == "i", value
        if type(value) in (list, tuple):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())


def test_rows_from_batches_of_several_depths_are_written_as_the_forest_reads_them():
    params = weights() + weights(seed=5)[:1]
    assert_written_as_uncached(lambda seed: forest_step(params, TREES, seed),
                               [0, 0, 0, 0, 0, 1, 2])


def test_a_batch_of_ops_of_different_row_counts_is_written_with_its_offsets():
    params = weights()
    assert_written_as_uncached(lambda seed: rows_step(params, rows_data(seed)),
                               [0, 0, 0, 0, 0, 1])


def test_inputs_read_alone_and_shared_results_of_lone_ops_are_written():
    params = weights()
    assert_written_as_uncached(lambda seed: alone_step(params, sequences(2, seed)),
                               [1, 1, 1, 1, 1, 2])
    lazy_replay._entries.clear()
    lazy_replay._seen.clear()
    assert_written_as_uncached(lambda seed: shared_step(params, sequences(4, seed)),
                               [1, 1, 1, 1, 1, 2])


def test_one_array_given_to_every_op_and_arrays_of_their_own_are_other_states():
    """A given array is named by the first leaf that is the same object: one start state
    for every sequence and a start state of each (other values) are two states, each
    written out."""
    params = weights()

    def run(shared):
        start = np.full((1, 4), 0.5, np.float32)
        starts = [start if shared else start * n for n in range(6)]
        return training_step(params, lambda w, u: [ops.mean(ops.tanh(ops.matmul_v2(
            ops.tanh(ops.matmul_v2(Variable(x, stop_gradient=False), w) + Variable(h0)), u)))
            for x, h0 in zip(sequences(1), starts)])
    assert_written_as_uncached(run, [True] * 6)
    before = unit_forward.written
    results = [run(False) for _ in range(6)]
    # (a new state of a graph with a walker: its first backward makes its schedule)
    assert unit_forward.written == before + 3 and len(schedules()) == 2
    for got in results:
        assert_same(got, uncached_run(run, False))


def test_held_intermediates_are_read_after_backward():
    """``test_unit_schedule``'s check of values held through backward, on a written run:
    the graph's first two backwards run before it."""
    for _ in range(2):
        step(weights(), sequences(5), [])
    before = unit_forward.written
    test_unit_schedule.test_held_intermediates_get_their_values_from_the_schedule()
    assert unit_forward.written == before + 1


def test_values_go_as_backward_consumes_them(monkeypatch):
    """``test_unit_schedule``'s check (as many arrays alive as each unit is done in every
    run, none after backward) over two cached runs and two written ones: the graph's first
    two backwards run before it."""
    for _ in range(2):
        step(weights(), sequences(5))
    before = unit_forward.written
    test_unit_schedule.test_values_go_as_backward_consumes_them(monkeypatch)
    assert unit_forward.written == before + 2


def test_a_shared_input_cut_from_a_batch_leaves_the_recipes_path():
    """Products sharing a weight computed in a batch (both weights scaled as one call) read
    their op's part of that batch's output: a batch the written forward does not take, so
    the recipes' path keeps running, bit for bit."""
    params = weights()

    def run(seed):
        def losses(w, u):
            half_w, half_u = ops.scale(w, scale=0.5), ops.scale(u, scale=0.5)
            return [ops.mean(ops.tanh(ops.matmul_v2(ops.tanh(ops.matmul_v2(
                ops.tanh(Variable(x, stop_gradient=False)), half_w)), half_u)))
                for x in sequences(2, seed)]
        return training_step(params, losses)
    before = unit_forward.written
    results = [run(seed) for seed in (1, 1, 1, 1, 1, 2)]
    assert unit_forward.written == before
    schedule, = schedules()
    assert schedule.forward is False and schedule.runs == 4
    for seed, got in zip((1, 1, 1, 1, 1, 2), results):
        assert_same(got, uncached_run(run, seed))


def test_a_kernel_error_in_the_written_forward_leaves_the_next_step_whole(monkeypatch):
    params, data = weights(), sequences(5)
    for _ in range(4):
        step(params, data)
    invoke, calls = batching.invoke, []

    def failing(plan, arrays, wants=None, names=None):
        calls.append(plan)
        if len(calls) == 3:
            raise FloatingPointError("a kernel failed")
        return invoke(plan, arrays, wants, names)
    monkeypatch.setattr(batching, "invoke", failing)
    before = unit_forward.written
    with pytest.raises(FloatingPointError):
        step(params, data)
    monkeypatch.setattr(batching, "invoke", invoke)
    got = step(params, data)
    assert unit_forward.written == before + 1
    assert_same(got, uncached(params, data))


def evaluated(code: str, namespace: dict):
    return eval(code, namespace)   # noqa: S307  (the written forward's own expressions)


def written_rows(value, batch, rows):
    """``unit_gathers.rows_code`` of ``value``, evaluated."""
    namespace = {"v": value}

    def constant(x):
        namespace[f"c{len(namespace)}"] = x
        return f"c{len(namespace) - 1}"
    code, count = unit_gathers.rows_code("v", value.shape, batch, rows, constant)
    got = evaluated(code, namespace)
    assert got.shape[0] == count
    return got


ROWS = [[0, 1, 2, 3], [1, 2], [2], [3, 0, 2], [2, 3, 0, 1]]


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("layout", ["per op", "two per op", "offsets", "stacked"])
def test_written_rows_are_taken_as_rows_of_takes_them(layout, rows):
    """Each branch of ``batch_inputs._rows_of``: the same values, the output itself where
    it gives the output, a view where it gives a view."""
    size, offsets, stacked = 4, None, False
    shape = (size, 3)
    if layout == "two per op":
        shape = (2 * size, 3)
    elif layout == "offsets":
        offsets = [0, 1, 3, 4, 7]
        shape = (7, 3)
    elif layout == "stacked":
        shape, stacked = (size, 2, 3), True
    value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    batch = (size, (), offsets, stacked)
    expected = batch_inputs._rows_of((value,), 0, -1, batch, rows)
    got = written_rows(value, batch, rows)
    np.testing.assert_array_equal(got, expected)
    assert (got is value) == (expected is value)
    assert np.shares_memory(got, value) == np.shares_memory(expected, value)


@pytest.mark.parametrize("per_op", [1, 2])
@pytest.mark.parametrize("places", [[[0, 1], [2, 3]], [[2, 3], [0, 1]], [[0, 3], [1], [2]],
                                    [[3], [1, 0, 2]]])
def test_written_parts_are_put_in_op_order_as_in_op_order_puts_them(places, per_op):
    values = [np.arange(len(ps) * per_op * 2, dtype=np.float32).reshape(-1, 2) + 100 * i
              for i, ps in enumerate(places)]
    namespace = {"concatenate": np.concatenate}
    for i, value in enumerate(values):
        namespace[f"p{i}"] = value

    def constant(x):
        namespace[f"c{len(namespace)}"] = x
        return f"c{len(namespace) - 1}"
    parts = [(ps, f"p{i}", len(value)) for i, (ps, value) in enumerate(zip(places, values))]
    code = unit_gathers.in_op_order_code(parts, (2,), "concatenate", constant)
    expected = batch_inputs._in_op_order([(ps, v) for ps, v in zip(places, values)], None,
                                         "X", np.concatenate, -1)
    np.testing.assert_array_equal(evaluated(code, namespace), expected)


def test_parts_of_other_row_counts_are_not_written():
    with pytest.raises(unit_gathers.Unwritable):
        unit_gathers.in_op_order_code([([0, 2], "a", 3), ([1], "b", 1)], (2,),
                                      "concatenate", str)
