"""Calls of one cell on inputs of different row counts batch together (each op keeping its row
offsets); the per-sample losses, reductions over everything, batch stacked by row count. Their
gradients go back into the rows of batches whose ops differ in rows: lazy Tape equals eager
Tape, as plain ops and as ``tape.function`` cells."""
import contextlib

import numpy as np
import pytest
from batching_cases import floats

import tape
from tape import layers, ops

PATTERNS = {
    "cycling 1, 2, 3": [1 + i % 3 for i in range(16)],
    "in runs": [1] * 6 + [3] * 5 + [2] * 5,
    "one odd out": [2] * 15 + [1],
    "descending": [3 - i * 3 // 16 for i in range(16)],
}


def linear_cell():
    tape.seed(4)
    linear = layers.Linear(8, 16)

    def cell(x, h):
        a, b = ops.split(linear(ops.concat([x, h], axis=1)), num=2, axis=1)
        return ops.tanh(a) * ops.sigmoid(b)
    return cell, linear.params()


def row_wise_cell(x, h):
    """The cell without its product: every op computes each element as it would alone."""
    a, b = ops.split(ops.concat([x, h, h, x], axis=1), num=2, axis=1)
    return ops.tanh(a) * ops.sigmoid(b)


def run(cell, xs, params, lazy):
    """Each call's output, the loss and the gradients of ``params`` and ``xs``, on an eager
    or a lazy tape."""
    for v in params + xs:
        v.grad = None
    with tape.lazy() if lazy else contextlib.nullcontext():
        tape.reset_global_tape()
        outs = [cell(x, x * 2.0) for x in xs]
        loss = ops.sum([ops.reduce_sum(o * o) for o in outs])
        loss.backward()
        values = [o.numpy() for o in outs]
        return values, loss.numpy(), [v.grad.numpy() for v in params + xs]


def inputs(rows):
    rng = np.random.default_rng(len(rows))
    return [tape.Variable(floats(rng, (n, 4)), stop_gradient=False) for n in rows]


def assert_close_to_eager(lazy, eager):
    """Each call's output, the loss and the gradients within float32 rounding (a batch's
    products are one BLAS call over all rows, its per-sample sums one stacked reduction)."""
    for a, e in zip(lazy[0], eager[0], strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(lazy[1], eager[1], rtol=1e-6)
    for a, e in zip(lazy[2], eager[2], strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * np.abs(e).max())


@pytest.mark.usefixtures("user_ops")    # a traced cell registers an op: removed after
@pytest.mark.parametrize("traced", [False, True], ids=["ops", "tape.function"])
@pytest.mark.parametrize("rows", PATTERNS.values(), ids=PATTERNS.keys())
def test_a_linear_cell_on_mixed_row_counts_equals_eager(rows, traced, kernel_calls):
    """As ops, the cells' product is one call over every row; as a ``tape.function``, traced
    once per row count, the calls of each row count are one call. The per-sample sums batch
    stacked, by row count."""
    cell, params = linear_cell()
    xs = inputs(rows)
    eager = run(cell, xs, params, lazy=False)
    kernel_calls.clear()
    lazy = run(tape.function(cell) if traced else cell, xs, params, lazy=True)
    if traced:
        calls = sorted(arrays["Arg0"].shape[0] for t, arrays in kernel_calls
                       if t.startswith("function_") and not t.endswith("_grad"))
        assert calls == sorted(rows.count(n) * n for n in set(rows))
    else:
        assert [arrays["X"].shape[0] for t, arrays in kernel_calls if t == "mul"] == [sum(rows)]
    stacked = sorted(arrays["X"].shape[:2] for t, arrays in kernel_calls
                     if t == "reduce_sum" and arrays["X"].ndim == 3)
    assert stacked == sorted((rows.count(n), n) for n in set(rows) if rows.count(n) > 1)
    assert_close_to_eager(lazy, eager)


@pytest.mark.parametrize("rows", PATTERNS.values(), ids=PATTERNS.keys())
def test_a_row_wise_cell_on_mixed_row_counts_gives_eager_values_bit_for_bit(rows):
    xs = inputs(rows)
    eager = run(row_wise_cell, xs, [], lazy=False)
    lazy = run(row_wise_cell, xs, [], lazy=True)
    for a, e in zip(lazy[0], eager[0], strict=True):
        np.testing.assert_array_equal(a, e)
    assert_close_to_eager(lazy, eager)
