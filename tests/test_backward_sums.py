"""Eager backward's gradient sums: a variable's gradient parts are added in the order backward
reaches them, and an embedding table's gradient takes each lookup's rows in place.

The reference sums dense per-lookup tables in backward's order (the last recorded lookup
first), as backward did before it added rows into one table: where every lookup holds each id
at most once the two orders are the same additions, so the results are equal bit for bit.
"""
import numpy as np
import pytest

import tape
from tape import functional, ops
from tape.kernels.cpu import embedding as cpu_embedding
from tape.ops.rules import float_same_as
from tape.registry import GradOp, kernel, register_op

CHECKS = [{"FLAGS_enable_unused_var_check": False, "FLAGS_check_nan_inf": False},
          {"FLAGS_enable_unused_var_check": True, "FLAGS_check_nan_inf": True}]


class _CountingNumpy:
    """numpy, counting ``zeros`` calls (the tables the embedding's gradient kernel makes)."""

    def __init__(self):
        self.tables = 0

    def zeros(self, *args, **kwargs):
        self.tables += 1
        return np.zeros(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(np, name)


def _table(rng, dtype, rows=40, width=6):
    return tape.Variable(rng.standard_normal((rows, width)).astype(dtype), stop_gradient=False)


def _lookups(rng, rows, sizes, repeat):
    """Id arrays of ``sizes``; without ``repeat``, no id twice within one lookup."""
    if repeat:
        return [rng.integers(0, rows, size) for size in sizes]
    return [rng.choice(rows, size, replace=False) for size in sizes]


def _weighted_lookups(w, ids, weights):
    """``sum_k sum(lookup(w, ids_k) * weights_k)``, recorded in order."""
    loss = None
    for k, c in zip(ids, weights):
        term = ops.reduce_sum(functional.embedding(tape.Variable(k), w) * tape.Variable(c),
                              reduce_all=True)
        loss = term if loss is None else loss + term
    return loss


def _dense_reference(shape, dtype, ids, weights):
    """The table gradient as a sum of dense per-lookup tables, in backward's order."""
    total = None
    for k, c in reversed(list(zip(ids, weights))):
        part = np.zeros(shape, dtype)
        np.add.at(part, k, c)
        total = part if total is None else total + part
    return total


@pytest.mark.parametrize("flags", CHECKS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lookups_of_distinct_ids_sum_bit_for_bit(flags, dtype, restore_flags):
    tape.set_flags(flags)
    rng = np.random.default_rng(3)
    w = _table(rng, dtype)
    # one id per lookup, as a Tree-LSTM's leaves, then lookups of several ids
    ids = _lookups(rng, 40, [1] * 12 + [5, 9, 3], repeat=False)
    ids += [np.array([ids[0][0]]), np.array([ids[1][0]])]      # rows met before
    weights = [rng.standard_normal((len(k), 6)).astype(dtype) for k in ids]
    tape.reset_global_tape()
    _weighted_lookups(w, ids, weights).backward()
    expected = _dense_reference(w.shape, dtype, ids, weights)
    assert w.grad.dtype == dtype and w.grad.shape == w.shape
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_lookups_add_rows_into_one_table(monkeypatch, restore_flags):
    """With the checks off, the first lookup's gradient is the one table; every other lookup
    adds its rows into it."""
    tape.set_flags(CHECKS[0])
    rng = np.random.default_rng(4)
    w = _table(rng, np.float32, rows=1000, width=8)
    ids = _lookups(rng, 1000, [1] * 20, repeat=False)
    weights = [rng.standard_normal((1, 8)).astype(np.float32) for _ in ids]
    counting = _CountingNumpy()
    monkeypatch.setattr(cpu_embedding, "np", counting)
    tape.reset_global_tape()
    _weighted_lookups(w, ids, weights).backward()
    assert counting.tables == 1
    np.testing.assert_array_equal(w.grad.numpy(),
                                  _dense_reference(w.shape, np.float32, ids, weights))


@pytest.mark.parametrize("flags", CHECKS)
def test_repeated_ids_across_lookups_sum_within_rounding(flags, restore_flags):
    """An id twice in one lookup and again in another: the in-place sum adds the rows in a
    different grouping than a sum of tables, so float rounding may differ (float64 here)."""
    tape.set_flags(flags)
    rng = np.random.default_rng(5)
    w = _table(rng, np.float64, rows=7)
    ids = _lookups(rng, 7, [30, 1, 12, 30], repeat=True)
    weights = [rng.standard_normal((len(k), 6)) for k in ids]
    tape.reset_global_tape()
    _weighted_lookups(w, ids, weights).backward()
    np.testing.assert_allclose(w.grad.numpy(), _dense_reference(w.shape, np.float64, ids,
                                                                weights), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("flags", CHECKS)
def test_a_gradient_shared_with_another_variable_is_never_written(flags, restore_flags):
    """``elementwise_add``'s gradient hands one array to both inputs: the table's first
    gradient part is that array, so the lookups' rows must go into a new sum, leaving the
    other input's gradient as it was."""
    tape.set_flags(flags)
    rng = np.random.default_rng(6)
    w = _table(rng, np.float64, rows=5, width=3)
    v = _table(rng, np.float64, rows=5, width=3)
    ids = [np.array([1, 3]), np.array([3])]
    weights = [rng.standard_normal((len(k), 3)) for k in ids]
    c = rng.standard_normal((5, 3))
    tape.reset_global_tape()
    lookups = _weighted_lookups(w, ids, weights)
    (lookups + ops.reduce_sum((w + v) * tape.Variable(c), reduce_all=True)).backward()
    np.testing.assert_array_equal(v.grad.numpy(), c)
    expected = c + _dense_reference(w.shape, np.float64, ids, weights)
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-15)


@pytest.mark.parametrize("flags", CHECKS)
def test_a_computed_table_passes_its_summed_gradient_on(flags, restore_flags):
    """Lookups of a table computed from a leaf: its rows are summed, then flow through the
    op that made it."""
    tape.set_flags(flags)
    rng = np.random.default_rng(7)
    w = _table(rng, np.float64, rows=9, width=4)
    ids = _lookups(rng, 9, [1, 1, 2, 1], repeat=False)
    weights = [rng.standard_normal((len(k), 4)) for k in ids]
    tape.reset_global_tape()
    _weighted_lookups(ops.scale(w, scale=3.0), ids, weights).backward()
    np.testing.assert_array_equal(
        w.grad.numpy(), 3.0 * _dense_reference(w.shape, np.float64, ids, weights))


@pytest.mark.parametrize("flags", CHECKS)
def test_the_table_gradient_adds_to_what_grad_held(flags, restore_flags):
    tape.set_flags(flags)
    rng = np.random.default_rng(8)
    w = _table(rng, np.float32, rows=6, width=2)
    ids = [np.array([2]), np.array([2, 4])]
    weights = [np.ones((len(k), 2), np.float32) for k in ids]
    for _ in range(2):
        tape.reset_global_tape()
        _weighted_lookups(w, ids, weights).backward()
    expected = _dense_reference(w.shape, np.float32, ids, weights)
    np.testing.assert_array_equal(w.grad.numpy(), expected + expected)


def _register_product(op_type, calls):
    """``Out = X * Y`` (same shapes), whose grad kernel offers ``add_into``; ``calls`` logs
    which of the two ran for each grad op."""
    register_op(op_type, inputs=["X", "Y"], outputs=["Out"], infer_shape=float_same_as("X"),
                grad=GradOp(reads=["X", "Y"]))

    @kernel(op_type)
    def product(X, Y):
        return X * Y

    def product_grad(X, Y, dOut, wants):
        calls.append("kernel")
        return (dOut * Y if "X@GRAD" in wants else None,
                dOut * X if "Y@GRAD" in wants else None)

    def product_grad_into(targets, X, Y, dOut, wants):
        calls.append("into")
        result = []
        for target, slot, other in zip(targets, ("X@GRAD", "Y@GRAD"), (Y, X)):
            if slot not in wants or target is not None:
                if target is not None:
                    target += dOut * other
                result.append(None)
            else:
                result.append(dOut * other)
        return tuple(result)

    product_grad.add_into = product_grad_into
    kernel(op_type + "_grad")(product_grad)


@pytest.mark.parametrize("flags", CHECKS)
def test_a_grad_kernel_adds_several_gradients_into_their_sums(flags, user_ops, restore_flags):
    """Both outputs of a grad op go into sums backward holds, one of them twice over (x times
    x), and one input wants no gradient; the sums are those of the kernel's own arrays."""
    tape.set_flags(flags)
    calls = []
    _register_product("user_product", calls)
    rng = np.random.default_rng(9)
    x, y = (tape.Variable(rng.standard_normal((3, 4)), stop_gradient=False) for _ in range(2))
    k = rng.standard_normal((3, 4))
    tape.reset_global_tape()
    a, b, c = ops.user_product(x, y), ops.user_product(x, y), ops.user_product(x, x)
    ops.reduce_sum(ops.user_product(a + b + c, tape.Variable(k)), reduce_all=True).backward()
    # backward's order: the last product (k wants none), then c's, b's and a's, each dOut = k
    xv, yv = x.numpy(), y.numpy()
    gx = k * xv
    gx = gx + k * xv
    gx += k * yv
    gx += k * yv
    gy = k * xv
    gy += k * xv
    np.testing.assert_array_equal(x.grad.numpy(), gx)
    np.testing.assert_array_equal(y.grad.numpy(), gy)
    checking = flags["FLAGS_check_nan_inf"]
    assert calls == ["kernel"] * 4 if checking else ["kernel", "kernel", "into", "into"]
