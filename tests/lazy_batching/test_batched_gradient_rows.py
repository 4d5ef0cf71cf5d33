"""Batched backward's gradient rows: a Tree-LSTM over 16 trees gets eager Tape's gradients, and
rows of earlier batches, read in interleaved runs, in any order or by the per-op path's
accumulations, add up as eager Tape's (bit for bit where the same sums run)."""
import pathlib
import sys

import numpy as np
import pytest
from batching_cases import assert_unbatched_equal_bit_for_bit, batching_off, floats, run_lazily

import tape
import tape.layers  # noqa: F401  (the benchmark's models use tape.layers)
from tape import Variable, batched_backward, batching, ops


def _benchmark_models():
    """benchmarks/dynamic_models.py, whose Tree-LSTM (hidden 64) the test trains."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import dynamic_models
    finally:
        sys.path.pop(0)
    return dynamic_models


def test_tree_lstm_gradients_over_16_trees_match_eager(kernel_calls):
    dynamic = _benchmark_models()
    rng = np.random.default_rng(5)
    samples = [(dynamic.random_tree(rng, int(rng.integers(2, 7))), int(rng.integers(5)))
               for _ in range(16)]
    tape.seed(0)
    params, (loss,) = dynamic.forest_tape(tape, samples)
    tape.reset_global_tape()
    eager_loss = loss()
    eager_ops = len(tape.get_global_tape())
    eager_loss.backward()
    eager = [p.grad.numpy() for p in params]
    lazy_value, lazy = run_lazily(loss, params)
    np.testing.assert_allclose(lazy_value, eager_loss.numpy(), rtol=1e-6)
    for p, a, e in zip(params, lazy, eager):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * np.abs(e).max(), err_msg=p.name)
    forward_calls = [t for t, _ in kernel_calls if not t.endswith("_grad")]
    assert len(forward_calls) < eager_ops / 4, (len(forward_calls), eager_ops)


def test_gradient_rows_for_an_earlier_batch_in_interleaved_runs_add_as_eager(kernel_calls):
    """A batch of ops on 1 and 3 rows reads two earlier batches alternately (tanh, sigmoid,
    tanh, sigmoid): its input gradient reaches each earlier batch in two separate runs of
    rows, which are filed together; forward and gradients bit for bit unbatched."""
    rng = np.random.default_rng(11)
    xs = [Variable(floats(rng, (n, 4)), stop_gradient=False) for n in (1, 3, 1, 3, 3, 1)]

    def build():
        a = [ops.tanh(x) for x in xs]
        b = [ops.sigmoid(x) for x in xs]
        c = [ops.relu(v) for v in (a[0], b[1], a[2], b[3], a[4], b[5])]
        return ops.reduce_sum(ops.concat(c + [ops.square(v) for v in a + b], axis=0))
    batched = run_lazily(build, xs)
    calls = sorted((t, arrays["X"].shape) for t, arrays in kernel_calls
                   if t in ("tanh", "sigmoid", "relu"))
    assert calls == [("relu", (12, 4)), ("sigmoid", (12, 4)), ("tanh", (12, 4))]
    assert_unbatched_equal_bit_for_bit(build, xs, batched)


@pytest.mark.parametrize("rows", [1, 2])
def test_a_batch_reading_earlier_batches_in_turn_gets_its_rows_in_op_order(rows, kernel_calls):
    """A batch whose ops read two earlier batches in turn, out of their order, and an array
    given to one of them, gathers each earlier batch's rows at once and puts them back in op
    order: its input is every op's argument in op order, and forward and gradients are bit
    for bit unbatched."""
    rng = np.random.default_rng(13)
    xs = [Variable(floats(rng, (rows, 4)), stop_gradient=False) for _ in range(4)]
    given = Variable(floats(rng, (rows, 4)), stop_gradient=False)

    def build():
        a = [ops.tanh(x) for x in xs]
        b = [ops.sigmoid(x) for x in xs]
        read = [a[2], b[0], a[0], given, b[3], a[1], b[1]]
        c = [ops.relu(v) for v in read]
        return ops.reduce_sum(ops.concat(c + [ops.square(v) for v in a + b], axis=0)), read
    params = xs + [given]
    for p in params:
        p.grad = None
    with tape.lazy():
        tape.reset_global_tape()
        loss, read = build()
        loss.backward()
        batched = loss.numpy(), [p.grad.numpy() for p in params]
        expected = np.concatenate([v.numpy() for v in read])
    (relu_input,) = [arrays["X"] for t, arrays in kernel_calls if t == "relu"]
    np.testing.assert_array_equal(relu_input, expected)
    assert_unbatched_equal_bit_for_bit(lambda: build()[0], params, batched)


def test_a_batch_takes_rows_of_an_earlier_batch_in_any_order(kernel_calls):
    """Later batches read an earlier batch's output whole, as a slice and as rows out of order;
    a part read alone is cut out: all bit for bit what unbatched execution computes."""
    rng = np.random.default_rng(7)
    xs = [Variable(floats(rng, (2, 5))) for _ in range(6)]

    def run():
        with tape.lazy():
            ys = [ops.tanh(x) for x in xs]
            backwards = [ops.exp(ys[i]) for i in (5, 3, 1)]
            middle = [ops.sigmoid(ys[i]) for i in (1, 2, 3)]
            every = [ops.abs(y) for y in ys]
            tape.compute(*backwards, *middle, *every)
            alone = ys[2].numpy()
            return [v.numpy() for v in backwards + middle + every] + [alone]
    batched = run()
    calls = [(t, arrays["X"].shape) for t, arrays in kernel_calls]
    assert sorted(calls) == [("abs", (12, 5)), ("exp", (6, 5)), ("sigmoid", (6, 5)),
                             ("tanh", (12, 5))]
    with batching_off():
        unbatched = run()
    for a, b in zip(batched, unbatched, strict=True):
        np.testing.assert_array_equal(a, b)


def test_gradient_accumulations_of_the_per_op_path_batch_bit_for_bit(kernel_calls,
                                                                     monkeypatch):
    """The per-op path (a graph too small to go by units, here by raising the bar) defers
    each grad op; a variable's gradient parts are summed by Accumulations, which batch."""
    monkeypatch.setattr(batched_backward, "_SAMPLES", 10 ** 9)
    rng = np.random.default_rng(8)
    xs = [Variable(floats(rng, (2, 5)), stop_gradient=False) for _ in range(6)]
    groups = []
    run_accumulations = batching.run_accumulations

    def counting(ops):
        groups.append(len(ops))
        run_accumulations(ops)
    monkeypatch.setattr(batching, "run_accumulations", counting)

    def build():    # each x read three times: its gradient is a sum of three parts
        return ops.reduce_sum(ops.concat([ops.tanh(x) * x + ops.exp(x) for x in xs], axis=0))
    batched = run_lazily(build, xs)
    assert groups == [6]
    assert_unbatched_equal_bit_for_bit(build, xs, batched)


def test_gradient_parts_from_batches_sum_bit_for_bit(kernel_calls):
    """Each x is read by three batches: its gradient is three parts, each a run of rows of
    a batch's input gradient, added as eager backward adds them; one grad call per forward
    batch."""
    rng = np.random.default_rng(8)
    xs = [Variable(floats(rng, (2, 5)), stop_gradient=False) for _ in range(6)]

    def build():
        return ops.reduce_sum(ops.concat([ops.tanh(x) * x + ops.exp(x) for x in xs], axis=0))
    batched = run_lazily(build, xs)
    calls = [t for t, _ in kernel_calls]
    assert calls == ["tanh", "elementwise_mul", "exp", "elementwise_add", "concat",
                     "reduce_sum", "reduce_sum_grad", "concat_grad", "elementwise_add_grad",
                     "exp_grad", "elementwise_mul_grad", "tanh_grad"], calls
    assert_unbatched_equal_bit_for_bit(build, xs, batched)
