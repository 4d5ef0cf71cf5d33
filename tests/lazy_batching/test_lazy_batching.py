"""Autobatching of lazy execution: batched equals unbatched (bit for bit where each element is
computed alone, within float32 rounding where a batch is one matrix product or one sum), fewer
kernel calls, shared inputs passed once, DyNet's agenda (gradient rows across batches and the
Tree-LSTM over 16 trees: test_batched_gradient_rows.py)."""
import contextlib

import numpy as np
import pytest
from batching_cases import assert_unbatched_equal_bit_for_bit, batching_off, floats, run_lazily

import tape
from tape import Variable, ops


def test_independent_chains_run_as_one_call_per_op_bit_for_bit(kernel_calls):
    rng = np.random.default_rng(0)
    xs = [Variable(floats(rng, (2, 5)), stop_gradient=False) for _ in range(6)]

    def build():
        ys = [ops.exp(ops.tanh(ops.scale(x, scale=0.5, bias=0.1)) * x) for x in xs]
        return ops.reduce_sum(ops.concat(ys, axis=0))
    batched = run_lazily(build, xs)
    calls = [t for t, _ in kernel_calls]
    # one call each for scale, tanh, multiply, exp (6 chains) and their grads
    assert calls.count("tanh") == 1 and calls.count("elementwise_mul") == 1
    assert calls.count("tanh_grad") == 1 and calls.count("elementwise_mul_grad") == 1
    kernel_calls.clear()
    assert_unbatched_equal_bit_for_bit(build, xs, batched)
    assert [t for t, _ in kernel_calls].count("tanh") == 6


@pytest.mark.parametrize("rows", [(1,) * 8, (1, 3, 1, 2)])
def test_a_shared_weight_is_passed_once_and_its_gradient_summed(rows, kernel_calls):
    """Also where the inputs differ in batch size: the signature is the plan apart from the
    batch axis, so mul on (1, 5) and (3, 5) inputs with one weight is one product."""
    rng = np.random.default_rng(1)
    w = Variable(floats(rng, (5, 3)), stop_gradient=False)
    b = Variable(floats(rng, (3,)), stop_gradient=False)
    xs = [Variable(floats(rng, (n, 5)), stop_gradient=False) for n in rows]

    def build():
        hs = [ops.elementwise_add(ops.mul(x, w), b) for x in xs]
        return ops.reduce_sum(ops.concat([ops.tanh(h) for h in hs[::-1]], axis=0))
    params = [w, b, *xs]
    batched = run_lazily(build, params)
    muls = [arrays for t, arrays in kernel_calls if t == "mul"]
    assert len(muls) == 1 and muls[0]["X"].shape == (sum(rows), 5) and \
        muls[0]["Y"] is w.value()
    assert [t for t, _ in kernel_calls].count("mul_grad") == 1
    with batching_off():
        unbatched = run_lazily(build, params)
    np.testing.assert_allclose(batched[0], unbatched[0], rtol=1e-6)
    for a, e in zip(batched[1], unbatched[1]):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * np.abs(e).max())


def _cases(rng):
    """Per op family: (name, parameters, build) with several independent instances that a
    batch runs together."""
    n = 4
    w = Variable(floats(rng, (6, 4)), stop_gradient=False)
    emb = Variable(floats(rng, (10, 6)), stop_gradient=False)
    xs = [Variable(floats(rng, (2, 6)), stop_gradient=False) for _ in range(n)]
    ids = [Variable(rng.integers(0, 10, (3,)).astype(np.int64)) for _ in range(n)]
    labels = [Variable(rng.integers(0, 4, (2, 1)).astype(np.int64)) for _ in range(n)]

    def total(terms):
        return ops.reduce_sum(ops.concat([ops.reshape2(t, shape=[-1]) for t in terms], axis=0))

    return [
        ("matmul_v2", [w, *xs], lambda: total([ops.matmul_v2(x, w) for x in xs])),
        ("bias and activations", xs, lambda: total(
            [ops.sigmoid(ops.elementwise_mul(x, ops.relu(xs[0][0]))) for x in xs])),
        ("concat/split/slice", xs, lambda: total(
            [ops.slice(ops.concat(list(ops.split(x, num=2, axis=1))[::-1], axis=1),
                       axes=[1], starts=[1], ends=[5]) for x in xs])),
        ("lookup_table_v2", [emb], lambda: total(
            [ops.tanh(ops.lookup_table_v2(i, emb)) for i in ids])),
        ("softmax_with_cross_entropy", [w, *xs], lambda: total(
            [ops.softmax_with_cross_entropy(ops.matmul_v2(x, w), label)[1]
             for x, label in zip(xs, labels)])),
        ("reductions", xs, lambda: total(
            [ops.reduce_mean(ops.square(x), dim=[1]) + ops.reduce_max(x, dim=[-1])
             for x in xs])),
    ]


@pytest.mark.parametrize("case", range(6))
def test_each_batched_family_equals_unbatched(case, kernel_calls):
    name, params, build = _cases(np.random.default_rng(case))[case]
    batched = run_lazily(build, params)
    batched_calls = len(kernel_calls)
    kernel_calls.clear()
    with batching_off():
        unbatched = run_lazily(build, params)
    assert batched_calls < len(kernel_calls), name
    np.testing.assert_allclose(batched[0], unbatched[0], rtol=1e-6, err_msg=name)
    for a, e in zip(batched[1], unbatched[1]):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * max(np.abs(e).max(), 1),
                                   err_msg=name)


def test_a_lone_op_waits_while_other_work_can_run(kernel_calls):
    x, y = Variable(np.ones((1, 3), np.float32)), Variable(np.ones((1, 3), np.float32))
    with tape.lazy():
        a = ops.tanh(ops.tanh(ops.tanh(x)))     # tanh x3
        b = ops.tanh(ops.exp(y))                # exp, then a tanh that can join a's first
        tape.compute(a, b)
    # exp runs first (tanh(x) alone would be a batch of one while tanh(exp(y)) is coming),
    # then the two first-level tanh together: 4 calls, not 5
    assert [(t, arrays["X"].shape[0]) for t, arrays in kernel_calls] == [
        ("exp", 1), ("tanh", 2), ("tanh", 1), ("tanh", 1)]


def test_a_backward_that_goes_op_by_op_makes_no_units(monkeypatch, units_made):
    """One sample's graph goes by the per-op path: the forward ops it runs make no units (only
    a backward by units reads them), and its gradients are eager's bit for bit; 16 samples
    go by units."""
    made = units_made
    rng = np.random.default_rng(5)
    w = Variable(floats(rng, (4, 4)), stop_gradient=False)
    xs = [Variable(floats(rng, (1, 4))) for _ in range(16)]

    def build(samples):
        return ops.sum([ops.reduce_sum(ops.tanh(ops.matmul_v2(x, w)), reduce_all=True)
                        for x in samples])
    lazy = run_lazily(lambda: build(xs[:1]), [w])
    assert made == []
    w.grad = None
    build(xs[:1]).backward()
    np.testing.assert_array_equal(lazy[1][0], w.grad.numpy())
    run_lazily(lambda: build(xs), [w])
    assert made


def test_ops_differing_only_in_batch_axis_size_batch_together(kernel_calls):
    """Inputs of 1, 3, 2 and 1 rows: one call per op; later batches read their rows whole,
    as a slice and out of order; forward and gradients bit for bit unbatched."""
    rng = np.random.default_rng(9)
    xs = [Variable(floats(rng, (n, 5)), stop_gradient=False) for n in (1, 3, 2, 1)]

    def build():
        ys = [ops.tanh(x) for x in xs]
        backwards = [ops.exp(ys[i]) for i in (3, 0, 2)]
        middle = [ops.sigmoid(ys[i]) for i in (1, 2)]
        every = [ops.scale(y, scale=3.0) for y in ys]
        return ops.reduce_sum(ops.concat(backwards + middle + every, axis=0))
    batched = run_lazily(build, xs)
    calls = [(t, arrays.get("X", arrays.get("Out@GRAD")).shape) for t, arrays in kernel_calls
             if t in ("tanh", "exp", "sigmoid", "scale", "tanh_grad", "exp_grad")]
    assert sorted(calls) == [("exp", (4, 5)), ("exp_grad", (4, 5)), ("scale", (7, 5)),
                             ("scale", (7, 5)),     # (and scale's gradient, a scale)
                             ("sigmoid", (5, 5)), ("tanh", (7, 5)), ("tanh_grad", (7, 5))]
    assert_unbatched_equal_bit_for_bit(build, xs, batched)


def test_reductions_over_axis_0_and_everything_batch(kernel_calls):
    """The mean of each sample's loss, and reductions over axis 0 or every axis (with and
    without keep_dim): each kind runs once on its inputs stacked along a new axis, its grad
    too, and later batches read the stacked results."""
    rng = np.random.default_rng(11)
    xs = [Variable(floats(rng, (3, 4)), stop_gradient=False) for _ in range(5)]

    def build():
        terms = []
        for x in xs:
            h = ops.tanh(x)
            terms.append(ops.mean(h))
            terms.append(ops.reduce_sum(ops.exp(ops.reduce_sum(h, dim=[0])), reduce_all=True))
            terms.append(ops.reduce_mean(ops.reduce_max(h * x, dim=[0, -1], keep_dim=True)))
            terms.append(ops.reduce_min(ops.scale(h, scale=2.0), dim=[], keep_dim=True))
        return ops.scale(ops.sum([ops.reshape2(t, shape=[1]) for t in terms]), scale=0.5)
    batched = run_lazily(build, xs)
    calls = [(t, arrays.get("X", arrays.get("Out@GRAD")).shape) for t, arrays in kernel_calls
             if t.startswith(("reduce", "mean", "exp"))]
    assert sorted(calls) == sorted([
        ("reduce_mean", (5, 3, 4)), ("reduce_mean_grad", (5, 3, 4)),     # the 5 means
        ("reduce_sum", (5, 3, 4)), ("reduce_sum_grad", (5, 3, 4)),       # over axis 0
        ("exp", (20,)), ("exp_grad", (20,)),                             # read stacked rows
        ("reduce_sum", (5, 4)), ("reduce_sum_grad", (5, 4)),             # reduce_all
        ("reduce_max", (5, 3, 4)), ("reduce_max_grad", (5, 3, 4)),
        ("reduce_mean", (5, 1, 1)), ("reduce_mean_grad", (5, 1, 1)),
        ("reduce_min", (5, 3, 4)), ("reduce_min_grad", (5, 3, 4))]), calls
    with batching_off():
        unbatched = run_lazily(build, xs)
    assert not any(t == "reduce_mean" and arrays["X"].shape == (5, 3, 4)
                   for t, arrays in kernel_calls[len(calls):])
    np.testing.assert_allclose(batched[0], unbatched[0], rtol=1e-6)
    for a, e in zip(batched[1], unbatched[1], strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * np.abs(e).max())


def test_a_batch_of_ops_of_two_tapes_gives_each_backward_its_own_rows(kernel_calls):
    """Pending ops of an earlier tape run in one batch with the current tape's: backward of
    the current tape's loss reaches only its own ops' inputs."""
    rng = np.random.default_rng(12)
    w = Variable(floats(rng, (4, 3)), stop_gradient=False)
    x1, x2 = (Variable(floats(rng, (2, 4)), stop_gradient=False) for _ in range(2))
    with tape.lazy():
        tape.reset_global_tape()
        earlier = ops.tanh(ops.mul(x1, w))
        tape.reset_global_tape()
        loss = ops.reduce_sum(ops.tanh(ops.mul(x2, w)) * 2.0)
        tape.compute(earlier, loss)
        loss.backward()
    assert [(t, arrays["X"].shape) for t, arrays in kernel_calls
            if t in ("mul", "tanh")] == [("mul", (4, 4)), ("tanh", (4, 3))]
    assert x1.grad is None
    expected_x2, expected_w = _eager_gradients(x2, w)
    np.testing.assert_allclose(x2.grad.numpy(), expected_x2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), expected_w, rtol=1e-5, atol=1e-6)


def _eager_gradients(x, w):
    tape.reset_global_tape()
    xe, we = (Variable(v.value(), stop_gradient=False) for v in (x, w))
    ops.reduce_sum(ops.tanh(ops.mul(xe, we)) * 2.0).backward()
    return xe.grad.numpy(), we.grad.numpy()


def test_a_graph_that_does_not_batch_gives_eager_gradients_at_every_backward():
    """Three ops of one signature (fewer than a batch of samples) share x, which gets three
    gradient parts: lazily, with fusion on and arrays too small to fuse, they are added in
    eager backward's order at the graph's first backward as at its later ones (which build and
    run its cached program)."""
    rng = np.random.default_rng(9)
    x = Variable(floats(rng, (1, 4)), stop_gradient=False)
    es = [Variable(floats(rng, (1, 4)), stop_gradient=False) for _ in range(3)]

    def loss():
        return ops.reduce_sum(ops.sum([ops.tanh(x + e) for e in es]), reduce_all=True)

    def gradients(lazy):
        for v in (x, *es):
            v.grad = None
        with tape.lazy() if lazy else contextlib.nullcontext():
            tape.reset_global_tape()
            loss().backward()
        return [v.grad.numpy() for v in (x, *es)]

    eager = gradients(lazy=False)
    for _ in range(3):
        for got, want in zip(gradients(lazy=True), eager, strict=True):
            np.testing.assert_array_equal(got, want)
