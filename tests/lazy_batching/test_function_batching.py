"""Calls of one tape.function batch on a lazy tape: arguments concatenated, captured Variables
shared, one kernel call forward and one grad call backward, where the trace is row-wise."""
import numpy as np
import pytest
from batching_cases import batching_off, floats, run_lazily

import tape
from tape import layers, ops

pytestmark = pytest.mark.usefixtures("user_ops")    # each trace registers an op: removed after

CALLS = 16


def cell_and_params():
    tape.seed(2)
    linear = layers.Linear(7, 6)

    def cell(x, h):
        a, b = ops.split(linear(ops.concat([x, h], axis=1)), num=2, axis=1)
        return ops.tanh(a) * ops.sigmoid(b), a
    return cell, linear.params()


def calls_of(cell, xs, hs):
    """The loss of ``CALLS`` calls of ``cell``, each on its own rows."""
    def build():
        outs = [cell(x, h) for x, h in zip(xs, hs)]
        return ops.sum([ops.reduce_sum(o * o) + ops.reduce_sum(a) for o, a in outs])
    return build


def variables(seed, rows, size):
    rng = np.random.default_rng(seed)
    return [tape.Variable(floats(rng, (rows, size)), stop_gradient=False) for _ in range(CALLS)]


def function_calls(kernel_calls, prefix="function_"):
    """``(forward rows per call, grad calls)`` of the function ops among ``kernel_calls``."""
    forward = [arrays["Arg0"].shape[0] for t, arrays in kernel_calls
               if t.startswith(prefix) and not t.endswith("_grad")]
    return forward, [t for t, _ in kernel_calls if t.startswith(prefix) and t.endswith("_grad")]


def test_calls_batch_into_one_kernel_call_forward_and_backward(kernel_calls):
    cell, params = cell_and_params()
    xs, hs = variables(0, 1, 4), variables(1, 1, 3)
    expected = run_lazily(calls_of(cell, xs, hs), params + xs)    # the cell's ops, batched
    kernel_calls.clear()
    got = run_lazily(calls_of(tape.function(cell), xs, hs), params + xs)
    assert function_calls(kernel_calls) == ([CALLS], [kernel_calls[-1][0]])
    np.testing.assert_array_equal(got[0], expected[0])
    for a, b in zip(got[1], expected[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max())


@pytest.mark.parametrize("check", [True, False])
def test_batched_calls_equal_unbatched_ones(check, restore_flags):
    """Row-wise ops compute each row as alone; the products (one BLAS call over all rows) and
    the captured weight's gradient (one product over all rows) round differently. With the
    unused-input check on and off (the traced kernels called through ``invoke`` or directly)."""
    tape.set_flags({"FLAGS_enable_unused_var_check": check})
    cell, params = cell_and_params()
    traced = tape.function(cell)
    xs, hs = variables(2, 2, 4), variables(3, 2, 3)
    batched = run_lazily(calls_of(traced, xs, hs), params + xs + hs)
    with batching_off():
        unbatched = run_lazily(calls_of(traced, xs, hs), params + xs + hs)
    np.testing.assert_allclose(batched[0], unbatched[0], rtol=1e-6)
    for a, b in zip(batched[1], unbatched[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max())


def test_a_function_that_is_not_row_wise_runs_stacked(kernel_calls):
    """A mean over all of an argument mixes its rows: concatenated calls would share it. The
    calls run as one on their arguments stacked (``tape.function_stacking``; each mean
    broadcast back over its own call's rows), equal to the function's ops run one by one (as
    eager Tape): the forward bit for bit, the gradients within float32 rounding (a stacked
    mean's and a broadcast difference's gradients sum in another order)."""
    def centred(x):
        return ops.tanh(x - ops.mean(x))

    def build(f):
        return lambda: ops.sum([ops.reduce_sum(f(x)) for x in xs])
    xs = variables(4, 2, 3)
    with batching_off():
        expected = run_lazily(build(centred), xs)
    kernel_calls.clear()
    got = run_lazily(build(tape.function(centred)), xs)
    stacked = [arrays["Arg0"].shape for t, arrays in kernel_calls
               if t.startswith("function_") and not t.endswith("_grad")]
    assert stacked == [(CALLS, 2, 3)] and len(function_calls(kernel_calls)[1]) == 1
    np.testing.assert_array_equal(got[0], expected[0])
    for a, b in zip(got[1], expected[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max())


def test_calls_with_other_captured_variables_batch_apart(kernel_calls):
    tape.seed(3)
    first, second = layers.Linear(4, 4), layers.Linear(4, 4)
    by_first, by_second = (tape.function(lambda x, layer=layer: ops.tanh(layer(x)))
                           for layer in (first, second))
    xs = variables(5, 1, 4)
    params = first.params() + second.params()
    run_lazily(lambda: ops.sum([ops.reduce_sum(by_first(x) + by_second(x)) for x in xs]),
               params)
    forward, grads = function_calls(kernel_calls)
    assert forward == [CALLS, CALLS] and len(grads) == 2
