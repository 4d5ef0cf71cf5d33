"""A weight used once per node at batch 1 (a Tree-LSTM's gates, an LSTM cell over a sequence):
each use's gradient is an outer product, which eager backward has ``mul_grad`` and
``matmul_v2_grad`` add straight into the weight's running sum (``add_into``). The sum is the
one backward made before, bit for bit: the same products added in the same order."""
import numpy as np
import pytest

import tape
from tape import ops
from tape.kernels.cpu import math as cpu_math

CHECKS = [{"FLAGS_enable_unused_var_check": False, "FLAGS_check_nan_inf": False},
          {"FLAGS_enable_unused_var_check": True, "FLAGS_check_nan_inf": True}]
USES, K, N = 7, 48, 40      # K * N is past OUTER_NUMBA_FROM: the numba outer product


class _Counting:
    """Wraps ``_add_outer``, counting the products added in place."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def _values(rng, shape, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    a.flat[::5] = -0.0      # signed zeros: a * b + 0 as GEMM gives them
    return a


def _uses(rng, dtype, transposed: bool):
    """``(weight, xs, cs, loss)``: the loss sums ``(x_k @ W) * c_k`` over the uses, through
    ``mul``, or through ``matmul_v2`` with ``trans_y`` and W stored (N, K)."""
    w = tape.Variable(_values(rng, (N, K) if transposed else (K, N), dtype), stop_gradient=False)
    xs = [_values(rng, (1, K), dtype) for _ in range(USES)]
    cs = [_values(rng, (1, N), dtype) for _ in range(USES)]
    tape.reset_global_tape()
    loss = None
    for x, c in zip(xs, cs):
        h = ops.matmul_v2(tape.Variable(x), w, trans_y=True) if transposed else \
            ops.mul(tape.Variable(x), w)
        term = ops.reduce_sum(h * tape.Variable(c), reduce_all=True)
        loss = term if loss is None else loss + term
    return w, xs, cs, loss


def _reference(xs, cs, transposed: bool):
    """Each use's product by BLAS, summed in backward's order (the last use first)."""
    total = None
    for x, c in reversed(list(zip(xs, cs))):
        part = c.T @ x if transposed else x.T @ c
        total = part if total is None else total + part
    return total


@pytest.mark.parametrize("flags", CHECKS)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_outer_products_add_into_one_sum_bit_for_bit(flags, transposed, dtype, monkeypatch,
                                                     restore_flags):
    tape.set_flags(flags)
    counting = _Counting(cpu_math._add_outer)
    monkeypatch.setattr(cpu_math, "_add_outer", counting)
    w, xs, cs, loss = _uses(np.random.default_rng(1), dtype, transposed)
    loss.backward()
    assert w.grad.numpy().tobytes() == _reference(xs, cs, transposed).tobytes()
    checking = flags["FLAGS_check_nan_inf"]
    # every use after the first adds in place, unless a check runs the plain kernel
    assert counting.calls == (0 if checking else USES - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_add_into_a_target_as_their_gradient_added(dtype):
    rng = np.random.default_rng(2)
    x, y, dout = (_values(rng, shape, dtype) for shape in ((1, K), (K, N), (1, N)))
    target = _values(rng, (K, N), dtype)
    dx, dy = cpu_math.mul_grad(x, y, dout, 1, 1, {"X@GRAD", "Y@GRAD"})
    expected = (target + dy).tobytes()
    got_dx, got_dy = cpu_math.mul_grad_into((None, target), x, y, dout, 1, 1,
                                            {"X@GRAD", "Y@GRAD"})
    assert got_dy is None and target.tobytes() == expected
    assert got_dx.tobytes() == dx.tobytes()
    yt = np.ascontiguousarray(y.T)
    dx, dy = cpu_math.matmul_v2_grad(x, yt, dout, False, True, {"X@GRAD", "Y@GRAD"})
    target = _values(rng, (N, K), dtype)
    expected = (target + dy).tobytes()
    got_dx, got_dy = cpu_math.matmul_v2_grad_into((None, target), x, yt, dout, False, True,
                                                  {"X@GRAD", "Y@GRAD"})
    assert got_dy is None and target.tobytes() == expected
    assert got_dx.tobytes() == dx.tobytes()


def test_kernels_return_what_they_cannot_add():
    """A product that is no outer product (batch 2), a small one (BLAS's), a target of
    another layout: the gradient comes back for backward to add, the target untouched."""
    rng = np.random.default_rng(3)
    wants = {"Y@GRAD"}
    for x, y, dout, target in [
            (rng.standard_normal((2, K)), rng.standard_normal((K, N)),
             rng.standard_normal((2, N)), np.zeros((K, N))),
            (rng.standard_normal((1, 3)), rng.standard_normal((3, 4)),
             rng.standard_normal((1, 4)), np.zeros((3, 4))),
            (rng.standard_normal((1, K)), rng.standard_normal((K, N)),
             rng.standard_normal((1, N)), np.zeros((N, K)).T)]:
        before = target.copy()
        _, dy = cpu_math.mul_grad_into((None, target), x, y, dout, 1, 1, wants)
        assert dy.tobytes() == cpu_math.mul_grad(x, y, dout, 1, 1, wants)[1].tobytes()
        assert np.array_equal(target, before)
