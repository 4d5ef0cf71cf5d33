"""LSTMCell, GRUCell and SimpleRNNCell on a lazy tape: each call is one op (a ``tape.function``
of the cell's equations), the calls of one time step of several sequences run as one batched
call, and the results are eager's: forward bit for bit, gradients within float64 rounding."""
import contextlib

import numpy as np
import pytest

import tape
from tape import batching, layers

RNG = np.random.default_rng(4)
STEPS, INPUT, HIDDEN = 4, 5, 6
CELLS = {"lstm": layers.LSTMCell, "gru": layers.GRUCell, "rnn": layers.SimpleRNNCell}


def _run(cell, xs: np.ndarray, lazy: bool):
    """Each sequence of ``xs`` (sequences, steps, 1, input) through ``cell`` from a zero state,
    in one graph; the final h's and the gradients of the parameters and the inputs for the
    sum of the final h's."""
    tape.reset_global_tape()
    with tape.lazy() if lazy else contextlib.nullcontext():
        inputs = [tape.Variable(x, stop_gradient=False) for x in xs]
        finals = []
        for x in inputs:
            state = None
            for t in range(STEPS):
                state = cell(x[t], state)
            finals.append(state[0] if isinstance(state, tuple) else state)
        tape.compute(*finals)   # (one execution: each h.numpy() alone would run its own)
        tape.ops.sum([tape.ops.reduce_sum(h, reduce_all=True) for h in finals]).backward()
        results = [h.numpy() for h in finals]
    grads = [p.grad.numpy() for p in cell.params()] + [x.grad.numpy() for x in inputs]
    for p in cell.params():
        p.grad = None
    return results, grads


def _batched_calls(monkeypatch) -> list:
    """The op types and sizes of the batched kernel calls made from now on."""
    calls, run_batch = [], batching.run_batch

    def counted(ops, rule):
        calls.append((ops[0].plan.info.type, len(ops)))
        run_batch(ops, rule)
    monkeypatch.setattr(batching, "run_batch", counted)
    return calls


@pytest.mark.parametrize("kind", CELLS)
@pytest.mark.parametrize("sequences", [1, 3])
def test_a_lazy_cell_is_one_op_per_call_batched_per_step_with_eager_results(kind, sequences,
                                                                           monkeypatch):
    """One sequence: the cell's traced ops run as eager's do, so forward is bit for bit;
    several: a step's calls run as one, whose products over more rows may round differently."""
    tape.seed(2)
    cell = CELLS[kind](INPUT, HIDDEN, dtype="float64")
    xs = RNG.standard_normal((sequences, STEPS, 1, INPUT))
    eager, eager_grads = _run(cell, xs, lazy=False)
    calls = _batched_calls(monkeypatch)
    lazy, lazy_grads = _run(cell, xs, lazy=True)
    if sequences > 1:
        cell_calls = [(op, n) for op, n in calls if op.startswith(f"function_{cell._prefix}_")]
        # one call per step, forward and backward, for every sequence (the first step, from a
        # zero state that wants no gradient, is a trace of its own)
        assert all(n == sequences for _, n in cell_calls), calls
        grads = [op for op, _ in cell_calls if op.endswith("_grad")]
        assert len(grads) == len(cell_calls) - len(grads) == STEPS, calls
    for ours, expected in zip(lazy, eager, strict=True):
        if sequences == 1:
            np.testing.assert_array_equal(ours, expected)
        np.testing.assert_allclose(ours, expected, rtol=1e-13, atol=1e-15)
    for ours, expected in zip(lazy_grads, eager_grads, strict=True):
        np.testing.assert_allclose(ours, expected, rtol=1e-13, atol=1e-15)


def test_a_lazy_cell_records_nothing_but_its_op():
    cell = layers.LSTMCell(INPUT, HIDDEN)
    x = tape.Variable(RNG.standard_normal((2, INPUT)).astype(np.float32))
    with tape.lazy():
        tape.reset_global_tape()
        cell(x, (cell.zeros(2), cell.zeros(2)))
        types = [h.type for h in tape.get_global_tape()]
    assert len(types) == 1 and types[0].startswith("function_lstm_cell_"), types


def test_a_replaced_parameter_is_the_one_a_lazy_cell_uses():
    """The trace captures the parameters it finds: replacing one makes a new trace, so the lazy
    cell never computes with the old one (as eager never does)."""
    cell = layers.GRUCell(INPUT, HIDDEN, dtype="float64")
    xs = RNG.standard_normal((1, STEPS, 2, INPUT))
    _run(cell, xs, lazy=True)
    cell.weight_hh = layers.GRUCell(INPUT, HIDDEN, dtype="float64").weight_hh   # (another's)
    eager, eager_grads = _run(cell, xs, lazy=False)
    lazy, lazy_grads = _run(cell, xs, lazy=True)
    np.testing.assert_array_equal(lazy[0], eager[0])
    np.testing.assert_allclose(lazy_grads[1], eager_grads[1], rtol=1e-13, atol=1e-15)


def test_the_step_function_is_not_a_parameter_holder():
    cell = layers.LSTMCell(INPUT, HIDDEN)
    before = [name for name, _ in cell.named_parameters()]
    with tape.lazy():
        tape.reset_global_tape()
        cell(tape.Variable(RNG.standard_normal((1, INPUT)).astype(np.float32)))
    assert [name for name, _ in cell.named_parameters()] == before
    assert list(cell.state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
