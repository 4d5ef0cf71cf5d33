"""Cached lazy backward of a graph whose ops batch (``lazy_program.Schedule``): the per-op
path's kernel calls, kept at the graph's second backward and run again in the same order
(batches and all) from the third on, without deciding them again; results bit for bit the
per-op path's, and a graph in another state never runs the schedule."""
import numpy as np
import pytest
from test_lazy_replay import gradients, per_op, same

from tape import lazy_program, lazy_replay, ops


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(lazy_replay, "_entries", {})
    monkeypatch.setattr(lazy_replay, "_seen", set())


def values(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, shape).astype(np.float32)
            for shape in ((3, 5), (3, 5), (5, 8))]


def cell(x, h, w, held=None):
    """An LSTM-like cell: two products with one weight (a batch of matmuls, which rounds as
    one BLAS call), three sigmoids of one shape (a batch), their grads batched too."""
    gates = ops.split(ops.matmul_v2(x, w) + ops.matmul_v2(h, w), num=4, axis=1)
    i, f, o = (ops.sigmoid(g) for g in gates[:3])
    c = f * ops.tanh(gates[3]) + i
    if held is not None:
        held.append(c)
    return ops.reduce_sum(o * ops.tanh(c), reduce_all=True)


def held_cell(x, h, w, held):
    return cell(x, h, w, held)


def test_a_batching_graph_runs_the_per_op_paths_kernel_calls_again(kernel_calls):
    data = values()
    runs, results = [], []
    replays = lazy_replay.replays
    for _ in range(4):
        before = lazy_program.rescheduled
        del kernel_calls[:]
        results.append(gradients(cell, data))
        runs.append(list(kernel_calls))
    assert lazy_program.rescheduled == before + 1 and lazy_replay.replays == replays
    first, built, *scheduled = runs
    assert first.count("matmul_v2") == 1 and first.count("sigmoid") == 1   # (batched)
    assert built == first and all(calls == first for calls in scheduled)
    for got in results[1:]:
        same(got, results[0])
    for seed in (1, 2):     # new leaf values, the same schedule
        before = lazy_program.rescheduled
        got = gradients(cell, values(seed))
        assert lazy_program.rescheduled == before + 1
        same(got, per_op(cell, values(seed)))
    eager = gradients(cell, data, lazy=False)
    for got, expected in zip(results[-1][0], eager[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def rows(x, h, w):
    """Rows of one input through one weight (a batch of three matmuls, whose weight gradient
    is summed by one batched grad call), tanh batched, stacked reductions, a concat."""
    acts = [ops.tanh(ops.matmul_v2(r, w)) for r in ops.split(x, num=3, axis=0)]
    sums = [ops.reduce_sum(a, reduce_all=True) for a in acts]
    joined = ops.concat([*acts, ops.matmul_v2(h, w)], axis=0)
    return ops.reduce_sum(ops.sigmoid(joined), reduce_all=True) + sums[0] * sums[2] + sums[1]


@pytest.mark.parametrize("graph", [cell, rows])
def test_scheduled_results_are_the_per_op_paths_for_new_values(graph, kernel_calls):
    for seed in range(4):
        before = lazy_program.rescheduled
        del kernel_calls[:]
        got = gradients(graph, values(seed))
        calls = list(kernel_calls)
        assert lazy_program.rescheduled == before + (seed >= 2)
        del kernel_calls[:]
        same(got, per_op(graph, values(seed)))
        assert calls == kernel_calls
    assert calls.count("matmul_v2") == 1    # (every product of the forward in one batch)


def test_a_graph_in_another_state_never_runs_the_schedule():
    """The same ops with an intermediate held (its value stored, the state's reference counts
    differ): the per-op path, which makes its own schedule (the graph's key is known)."""
    data = values()
    for _ in range(3):
        gradients(cell, data)
    before = lazy_program.rescheduled
    got = gradients(held_cell, data, hold=True)
    assert lazy_program.rescheduled == before
    expected = per_op(held_cell, data, hold=True)
    same(got, expected)
    for _ in range(2):
        same(gradients(held_cell, data, hold=True), expected)
    assert lazy_program.rescheduled == before + 2
    same(gradients(cell, data), per_op(cell, data))
    assert lazy_program.rescheduled == before + 3


def test_a_schedule_made_without_fusion_of_small_arrays_is_not_run_with_it(monkeypatch):
    """Fusion decides which ops run (a private libm value fused computes by libm): a schedule
    made while small arrays join no group never runs where they do."""
    from tape import fusion_steps

    data = values()
    for _ in range(3):
        gradients(cell, data)
    monkeypatch.setattr(fusion_steps, "MIN_ELEMENTS", 0)
    before = lazy_program.rescheduled
    same(gradients(cell, data), per_op(cell, data))
    assert lazy_program.rescheduled == before
