"""Lazy fusion, forward (``tape.fusion``): a group of pending elementwise ops runs as one numba
loop, equal to unfused execution and to eager Tape (bit for bit for + - * /, scale, relu,
square and sqrt; within float rounding for the libm functions), never skipping a value
something else can still ask for, and compiled once per group signature."""
import numpy as np
import pytest
from fusion_cases import arithmetic_chain, data, flags, lazy_value

import tape
from tape import Variable, ops
from tape.kernels import fused
from tape.pending import settle_all

pytestmark = pytest.mark.usefixtures("fuse_small_arrays")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_chain_runs_as_one_loop_bit_for_bit_as_unfused(kernel_calls, dtype):
    x, c = data((3, 5), dtype), data((3, 5), dtype, seed=1)
    eager = arithmetic_chain(x, c).value()
    fused_value = lazy_value(arithmetic_chain, x, c)
    assert kernel_calls == ["fused"]
    del kernel_calls[:]
    with flags(FLAGS_lazy_fusion=False):
        unfused = lazy_value(arithmetic_chain, x, c)
    assert len(kernel_calls) == 13 and "fused" not in kernel_calls
    assert fused_value.dtype == dtype and fused_value.shape == (3, 5)
    np.testing.assert_array_equal(fused_value, eager)
    np.testing.assert_array_equal(fused_value, unfused)


def test_relu_keeps_numpys_signed_zero_and_nan():
    x = Variable(np.array([-0.0, 0.0, np.nan, -1.0, 2.0, -np.inf], np.float32))

    def build(x):
        return ops.relu(x * 1.0) * 1.0
    got = lazy_value(build, x)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(build(x).value()))
    np.testing.assert_array_equal(got, build(x).value())


def test_libm_functions_match_within_float_rounding(kernel_calls):
    x = data((4, 8), seed=2)

    def build(x):
        return ops.tanh(ops.log(ops.exp(ops.sigmoid(x * 2.0)) + 1.0)) * 1.5
    fused_value = lazy_value(build, x)
    assert kernel_calls == ["fused"]
    np.testing.assert_allclose(fused_value, build(x).value(), rtol=4e-7, atol=0)


def test_an_intermediate_a_variable_holds_is_not_fused_away(kernel_calls):
    x = data((2, 3))
    with tape.lazy():
        tape.reset_global_tape()
        kept = ops.exp(x * 2.0)
        out = ops.relu(kept - 1.0) * 3.0
        value = out.value()
        # a libm value anyone can see is numpy's: exp runs alone, (- 1, relu, * 3) as one loop
        assert kernel_calls == ["scale", "exp", "fused"]
        np.testing.assert_array_equal(kept.value(), np.exp(x.value() * 2))
        exact = ops.sqrt(x * 2.0)
        out = ops.relu(exact - 1.0) * 3.0
        exact_out = out.value()
        # an exact step's value anyone can see is stored by the loop that computes it
        assert kernel_calls == ["scale", "exp", "fused", "fused"]
        assert exact._lazy[0].results is not None
        np.testing.assert_array_equal(exact.value(), np.sqrt(x.value() * 2))
    assert kernel_calls == ["scale", "exp", "fused", "fused"]
    np.testing.assert_array_equal(value, np.maximum(kept.value() - 1, 0) * 3.0)
    np.testing.assert_array_equal(exact_out, np.maximum(exact.value() - 1, 0) * 3.0)


def test_an_intermediate_read_by_another_pending_op_is_not_fused_away(kernel_calls):
    x = data((2, 3))
    with tape.lazy():
        tape.reset_global_tape()
        shared = x * 2.0
        first, second = ops.relu(shared - 1.0), ops.square(shared)
        del shared
        first_value = first.value()
        # one loop for x * 2, - 1 and relu, storing x * 2 for ``second``'s square
        assert kernel_calls == ["fused"]
        second_value = second.value()
    assert kernel_calls == ["fused", "square"]
    np.testing.assert_array_equal(first_value, np.maximum(x.value() * 2.0 - 1.0, 0))
    np.testing.assert_array_equal(second_value, np.square(x.value() * 2.0))


def test_an_intermediate_kept_for_backward_is_not_fused_away(kernel_calls):
    x = Variable(np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32),
                 stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        # square's gradient reads its input: the handle keeps x * 2's Variable
        loss = ops.reduce_sum(ops.square(x * 2.0) * 0.5)
        np.testing.assert_allclose(loss.value(), np.sum(np.square(x.value() * 2) * 0.5, axis=0),
                                   rtol=1e-6)
        # one loop for x * 2, square and * 0.5, storing x * 2 for square's gradient
        assert kernel_calls == ["fused", "reduce_sum"]
        del kernel_calls[:]
        loss.backward()
        # the grads of * 0.5, square and x * 2 in one loop, reading the stored x * 2
        assert kernel_calls == ["reduce_sum_grad", "fused"]
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.value(), rtol=1e-6)


def test_broadcasting_and_integer_ops_are_not_fused(kernel_calls):
    x, row = data((2, 3)), data((3,), seed=4)
    lazy_value(lambda x, row: ops.elementwise_add(x * 2.0, row) * 3.0, x, row)
    assert kernel_calls == ["scale", "elementwise_add", "scale"]
    del kernel_calls[:]
    n = Variable(np.arange(6, dtype=np.int64).reshape(2, 3))
    np.testing.assert_array_equal(lazy_value(
        lambda n: ops.scale(ops.scale(n, scale=2.0), scale=3.0), n),
                                  np.arange(6).reshape(2, 3) * 6)
    assert kernel_calls == ["scale", "scale"]


def test_the_loop_is_compiled_once_per_chain_signature(kernel_calls):
    x = data((7,), seed=5)

    def build(x, factor):
        y = x
        for _ in range(5):
            y = y * factor
            y = ops.tanh(y + 0.5)
        return y * 2.0
    lazy_value(build, x, 1.5)
    made = fused.compilations + fused.cache_loads     # (compiled, or loaded from disk)
    for factor in (0.5, 2.0, -1.0):   # other values, the same signature
        np.testing.assert_allclose(lazy_value(build, x, factor), build(x, factor).value(),
                                   rtol=4e-7)
    assert fused.compilations + fused.cache_loads == made and kernel_calls == ["fused"] * 4
    lazy_value(build, data((7,), np.float64), 1.5)     # another dtype: another loop
    assert fused.compilations + fused.cache_loads == made + 1


def test_identical_chains_batch_into_one_loop(kernel_calls):
    """Fusion keeps autobatching's gain: the same chain over six inputs is one loop call."""
    xs = [data((2, 5), seed=k) for k in range(6)]

    def build(*xs):
        return ops.concat([ops.exp(ops.tanh(x * 0.5 + 0.1) * x) for x in xs], axis=0)
    batched = lazy_value(build, *xs)
    assert kernel_calls == ["fused", "concat"]
    with flags(FLAGS_lazy_batching=False):
        alone = lazy_value(build, *xs)
    assert kernel_calls[2:] == ["fused"] * 6 + ["concat"]
    np.testing.assert_array_equal(batched, alone)
    np.testing.assert_allclose(batched, build(*xs).value(), rtol=4e-7)


@pytest.mark.parametrize("seed", range(4))
def test_random_chains_with_kept_values_equal_eager_bit_for_bit(kernel_calls, seed):
    """Random chains of the bit-exact steps over a few inputs, some intermediates kept by the
    test (never fused away), some read twice: every kept value equals eager Tape's."""
    rng = np.random.default_rng(seed)
    dtype = (np.float32, np.float64)[seed % 2]
    inputs = [data((2, 3), dtype, seed=seed * 10 + k, low=-2.0) for k in range(3)]
    steps = []
    for _ in range(25):
        kind = int(rng.integers(0, 7))
        other = int(rng.integers(0, len(inputs)))
        factor, bias = float(rng.uniform(-2, 2)), float(rng.choice([0.0, 0.3]))
        steps.append((kind, other, factor, bias, bool(rng.integers(0, 2)),
                      bool(rng.random() < 0.2)))

    def build(*xs):
        y, kept = xs[0], []
        for kind, other, factor, bias, after, keep in steps:
            c = xs[other]
            if kind == 0:
                y = ops.scale(y, scale=factor, bias=bias, bias_after_scale=after)
            elif kind == 1:
                y = ops.elementwise_add(y, c) if after else ops.elementwise_add(c, y)
            elif kind == 2:
                y = ops.elementwise_sub(y, c) if after else ops.elementwise_sub(c, y)
            elif kind == 3:
                y = ops.elementwise_mul(y, c) if after else ops.elementwise_mul(y, y)
            elif kind == 4:
                y = ops.elementwise_div(y, ops.square(c) + 1.0) if after else ops.relu(y)
            elif kind == 5:
                y = ops.sqrt(ops.square(y))
            else:
                y = ops.scale(y, scale=0.5)
            if keep:
                kept.append(y)
        return kept + [y]

    eager = [v.value() for v in build(*inputs)]
    with tape.lazy():
        tape.reset_global_tape()
        lazy = build(*inputs)
        settle_all(lazy)     # one execution: kept values and the chains between them
        lazy = [v.value() for v in lazy]
    assert "fused" in kernel_calls
    for e, z in zip(eager, lazy):
        np.testing.assert_array_equal(z, e)



def test_the_group_search_runs_only_where_two_fusable_ops_of_a_kind_meet(monkeypatch):
    """Fusable ops that read no fusable op of their kind (here each reads a matmul) can form
    no group: the search over every op (``fusion._groups``) is skipped, the results are the
    same; a fusable op reading another (``relu`` of a scale) is searched for and fused."""
    from tape import fusion

    searches = []
    real = fusion._groups

    def counted(needed, nodes):
        searches.append(len(needed))
        return real(needed, nodes)

    monkeypatch.setattr(fusion, "_groups", counted)
    x, w = data((4, 6)), data((6, 6), seed=1)

    def apart(x, w):
        return ops.matmul_v2(ops.relu(ops.matmul_v2(x, w)), ops.exp(w))

    got = lazy_value(apart, x, w)
    assert searches == []
    np.testing.assert_array_equal(got, apart(x, w).value())
    got = lazy_value(lambda x, w: ops.relu(apart(x, w) * 2.0), x, w)
    assert searches and searches[-1] > 2
    np.testing.assert_array_equal(got, ops.relu(apart(x, w) * 2.0).value())
