"""Lazy fusion, backward (``tape.fusion``): grad ops and gradient sums run in one numba loop,
equal to unfused execution and to eager Tape (bit for bit for the exact steps, within float
rounding for the libm functions), a leaf's gradient stored, loops compiled once and reused
across iterations, and what a barrier or a kept value needs left unfused."""
import contextlib

import numpy as np
import pytest
from fusion_cases import all_steps, data, flags, grads_of, lazy_value

import tape
from tape import Variable, fusion_steps, ops
from tape.kernels import fused

pytestmark = pytest.mark.usefixtures("fuse_small_arrays")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_runs_as_one_loop_bit_for_bit_as_unfused_and_eager(kernel_calls, dtype):
    x, c = data((3, 5), dtype), data((3, 5), dtype, seed=1)
    eager = grads_of(all_steps, (x, c), lazy=False)
    fused_grads = grads_of(all_steps, (x, c))
    # the loss's gradient (which reads only its input's shape), then the 24 forward ops, and
    # the grad ops and gradient sums of all of them, in one loop
    assert kernel_calls == ["reduce_sum_grad", "fused"]
    del kernel_calls[:]
    with flags(FLAGS_lazy_fusion=False):
        unfused = grads_of(all_steps, (x, c))
    assert "fused" not in kernel_calls and kernel_calls.count("elementwise_mul_grad") == 3
    for f, u, e in zip(fused_grads, unfused, eager):
        assert f.dtype == dtype and np.isfinite(f).all()
        np.testing.assert_array_equal(f, u)
        np.testing.assert_array_equal(f, e)


def test_libm_gradients_match_within_float_rounding(kernel_calls):
    x = data((4, 8), seed=2)

    def build(x):
        return ops.log(ops.sigmoid(x * 2.0) * x + 1.0) * 1.5
    fused_grad, = grads_of(build, (x,))
    # sigmoid's value, which sigmoid_grad and the product read, is numpy's (its own kernel);
    # log's is private (log_grad reads its input): the rest, forward and backward, one loop
    assert kernel_calls == ["reduce_sum_grad", "scale", "sigmoid", "fused"]
    eager, = grads_of(build, (x,), lazy=False)
    np.testing.assert_allclose(fused_grad, eager, rtol=1e-6, atol=0)


def test_mul_grad_gives_both_gradients_from_one_loop(kernel_calls):
    """A grad op with two outputs: dX and dY of x * w (and of relu's input) come from one
    pass, each stored for its leaf."""
    x, w = data((2, 6), seed=3, low=-1.0), data((2, 6), seed=4)

    def build(x, w):
        return ops.relu(ops.elementwise_mul(x, w)) * 0.5
    got = grads_of(build, (x, w))
    # x * w, relu, * 0.5 and their grads in one loop, which stores the two leaves' gradients
    # and the value the pending loss reads (its Variable lives while backward runs)
    assert kernel_calls == ["reduce_sum_grad", "fused"] and kernel_calls.stored == [3]
    for g, e in zip(got, grads_of(build, (x, w), lazy=False)):
        np.testing.assert_array_equal(g, e)


def test_a_gradient_sum_fuses_and_a_leafs_grad_is_stored(kernel_calls):
    """x read four times: its gradient is a sum of four parts, computed in the loop; the
    sum is the leaf's .grad, never skipped, and a value the user keeps is stored too."""
    x = data((3, 4), seed=5)
    xs = Variable(x.value().copy(), stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        kept = ops.sqrt(xs * 3.0)
        y = ops.elementwise_mul(kept, xs) + ops.square(xs) - xs
        ops.reduce_sum(y, reduce_all=True).backward()
        # x * 3, sqrt (which the grad ops read) and backward in one loop, storing x's
        # gradient and ``kept`` (the user holds it); no gradient reads y, which stays pending
        assert kernel_calls == ["reduce_sum_grad", "fused"] and kernel_calls.stored == [2]
        assert y._lazy[0].results is None
        got, kept_value = xs.grad.value(), kept.value()
    assert kernel_calls == ["reduce_sum_grad", "fused"]     # (both were stored)
    eager = Variable(x.value().copy(), stop_gradient=False)
    tape.reset_global_tape()
    kept_eager = ops.sqrt(eager * 3.0)
    ops.reduce_sum(ops.elementwise_mul(kept_eager, eager) + ops.square(eager) - eager,
                   reduce_all=True).backward()
    np.testing.assert_array_equal(kept_value, kept_eager.value())
    np.testing.assert_array_equal(got, eager.grad.value())


def test_backward_loops_are_compiled_once_and_reused_across_iterations(kernel_calls):
    """Training iterations on fresh tapes: the loop of forward and backward compiles on the
    first and is reused after, with other parameter values and other scale factors; the
    parameters train as eager Tape trains them."""
    rng = np.random.default_rng(6)
    start = [rng.uniform(0.5, 1.5, (4, 4)).astype(np.float32),
             rng.uniform(-0.5, 0.5, (4, 4)).astype(np.float32)]
    x = data((4, 4), seed=7)

    def train(lazy):
        w, b = (Variable(a.copy(), stop_gradient=False) for a in start)
        for step in range(4):
            with tape.lazy() if lazy else contextlib.nullcontext():
                tape.reset_global_tape()
                w.grad = b.grad = None
                h = ops.sqrt(ops.square(ops.elementwise_mul(x, w) + b) + 1.0)
                loss = ops.reduce_sum(ops.square(h - x * (1.0 + step)), reduce_all=True)
                loss.backward()
                for p in (w, b):    # an SGD step, eager
                    p._value = p.value() - 0.1 * p.grad.value()
            if step == 0:
                made = fused.compilations + fused.cache_loads
        assert fused.compilations + fused.cache_loads == made
        return w.value(), b.value()
    trained = train(lazy=True)
    assert kernel_calls == ["reduce_sum_grad", "fused"] * 4
    for got, eager in zip(trained, train(lazy=False)):
        np.testing.assert_array_equal(got, eager)


@pytest.mark.parametrize("seed", range(2))
def test_random_graphs_backward_equals_eager_bit_for_bit(kernel_calls, seed):
    """Random DAGs of the exact steps over three inputs that want gradients, intermediates
    read several times: fused lazy gradients equal eager Tape's."""
    rng = np.random.default_rng(100 + seed)
    dtype = (np.float32, np.float64)[seed % 2]
    inputs = [data((2, 3), dtype, seed=seed * 10 + k, low=0.5) for k in range(3)]
    steps = [(int(rng.integers(0, 8)), int(rng.integers(0, 100)), int(rng.integers(0, 3)),
              float(rng.uniform(0.5, 2)), float(rng.choice([0.0, 0.3])))
             for _ in range(20)]

    def build(*xs):
        values = list(xs)
        for kind, pick, other, factor, bias in steps:
            a, c = values[pick % len(values)], xs[other]
            if kind == 0:
                y = ops.scale(a, scale=factor, bias=bias)
            elif kind == 1:
                y = ops.elementwise_add(a, c)
            elif kind == 2:
                y = ops.elementwise_sub(a, c)
            elif kind == 3:
                y = ops.elementwise_mul(a, c)
            elif kind == 4:
                y = ops.elementwise_div(a, ops.square(c) + 1.0)
            elif kind == 5:
                y = ops.relu(a - 1.0)
            elif kind == 6:
                y = ops.sqrt(ops.square(a) + 1.0)
            else:
                y = ops.elementwise_mul(a, a) * 0.25
            values.append(y)
        total = values[3]
        for v in values[4:]:
            total = total + v
        return total

    got = grads_of(build, inputs)
    assert kernel_calls[-1] == "fused" and "elementwise_mul_grad" not in kernel_calls
    for g, e in zip(got, grads_of(build, inputs, lazy=False)):
        np.testing.assert_array_equal(g, e)


def test_fused_backward_without_batching_runs_in_record_order(kernel_calls):
    """With FLAGS_lazy_batching off the ops run in record order: a group runs at its last
    member's place, and groups that would run before an outside reader of theirs are not
    made; the gradients still equal eager Tape's."""
    x, c = data((3, 5)), data((3, 5), seed=1)
    with flags(FLAGS_lazy_batching=False):
        got = grads_of(all_steps, (x, c))
    assert "fused" in kernel_calls
    for g, e in zip(got, grads_of(all_steps, (x, c), lazy=False)):
        np.testing.assert_array_equal(g, e)


def test_small_arrays_are_left_to_single_kernels_by_default(kernel_calls, monkeypatch):
    monkeypatch.setattr(fusion_steps, "MIN_ELEMENTS", 8192)
    small, large = data((4, 8)), data((64, 128))     # 32 and 8,192 elements
    for x, expected in ((small, ["scale", "scale", "relu"]), (large, ["fused"])):
        del kernel_calls[:]
        np.testing.assert_array_equal(lazy_value(lambda x: ops.relu(x * 2.0 - 1.0), x),
                                      np.maximum(x.value() * 2.0 - 1.0, 0))
        assert kernel_calls == expected


def test_cells_after_a_split_batch_their_forward_and_backward_loops(kernel_calls):
    """Six cells reading the parts of one split (a list output) and written back by concat:
    forward and backward of each cell is one loop, and the six identical loops are one call;
    gradients equal eager Tape's bit for bit."""
    x = data((12, 5), seed=8)

    def build(x):
        parts = ops.split(x, num=6, axis=0)
        return ops.concat([ops.sqrt(ops.square(p * 0.5 + 0.1) + 1.0) * p for p in parts],
                          axis=0)
    got, = grads_of(build, (x,))
    # (split's gradient is a concat); each loop stores its cell's gradient and its cell's
    # output, which the pending forward concat (the loss's input) reads
    assert kernel_calls == ["reduce_sum_grad", "concat_grad", "split", "fused", "concat"]
    assert kernel_calls.stored == [2]
    eager, = grads_of(build, (x,), lazy=False)
    np.testing.assert_array_equal(got, eager)


@pytest.mark.parametrize("seed", range(2))
def test_random_graphs_with_barriers_and_kept_values_equal_eager(kernel_calls, seed):
    """Random graphs mixing fusable steps with ops that cannot join (a broadcasting add, a
    softmax, a row sum broadcast back), some values kept by the test and read after backward:
    gradients and kept values equal eager Tape's bit for bit, with batching on and off."""
    rng = np.random.default_rng(200 + seed)
    dtype = (np.float32, np.float64)[seed % 2]
    inputs = [data((3, 4), dtype, seed=seed * 10 + k, low=0.5) for k in range(2)]
    row = data((4,), dtype, seed=seed * 10 + 5)
    steps = [(int(rng.integers(0, 9)), int(rng.integers(0, 100)), int(rng.integers(0, 2)),
              float(rng.uniform(0.5, 2)), bool(rng.random() < 0.25)) for _ in range(16)]

    def build(*xs):
        values, kept = list(xs), []
        for kind, pick, other, factor, keep in steps:
            a, c = values[pick % len(values)], xs[other]
            if kind == 0:
                y = ops.scale(a, scale=factor, bias=0.25)
            elif kind == 1:
                y = ops.elementwise_mul(a, c) - a
            elif kind == 2:
                y = ops.elementwise_div(a, ops.square(c) + 1.0)
            elif kind == 3:
                y = ops.sqrt(ops.square(a) + 1.0)
            elif kind == 4:
                y = ops.relu(a - 1.0) + c
            elif kind == 5:
                y = ops.elementwise_add(a, row)            # broadcasting: a barrier
            elif kind == 6:
                y = ops.softmax(a, axis=-1) * factor       # a barrier
            elif kind == 7:
                y = ops.elementwise_mul(a, ops.reduce_sum(a, dim=[1], keep_dim=True), axis=0)
            else:
                y = ops.elementwise_mul(a, a) * 0.25
            values.append(y)
            if keep:
                kept.append(y)
        total = values[2]
        for v in values[3:]:
            total = total + v
        return total, kept

    def run(lazy):
        xs = [Variable(x.value().copy(), stop_gradient=False) for x in inputs]
        with tape.lazy() if lazy else contextlib.nullcontext():
            tape.reset_global_tape()
            total, kept = build(*xs)
            ops.reduce_sum(total, reduce_all=True).backward()
            return [x.grad.value() for x in xs] + [k.value() for k in kept]

    eager = run(lazy=False)
    for batching_on in (True, False):
        del kernel_calls[:]
        with flags(FLAGS_lazy_batching=batching_on):
            got = run(lazy=True)
        assert "fused" in kernel_calls
        for g, e in zip(got, eager):
            np.testing.assert_array_equal(g, e)

