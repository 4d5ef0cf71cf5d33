"""Calls of a tape.function whose ops split, concatenate or reduce along axis 0 (a sequence's
loss: its steps cut from one array, their losses averaged) batch on a lazy tape by stacking
their arguments on a new axis 0 (``tape.function_stacking``): one kernel call forward and one
grad call backward, equal to the calls run one by one."""
import numpy as np
import pytest
from batching_cases import batching_off, floats, run_lazily

import tape
from tape import layers, ops

pytestmark = pytest.mark.usefixtures("user_ops")    # each trace registers an op: removed after

CALLS, STEPS, VOCAB, WIDTH = 16, 5, 11, 6


def sequence_model(start_wants_grad=False):
    """``(sequence_loss, params)``: an embedding, a recurrent cell over the steps cut from the
    embedded sequence, a projection of every step's state and the mean cross-entropy; the
    start state is captured (shared by every call)."""
    tape.seed(4)
    embed, cell = layers.Embedding(VOCAB, WIDTH), layers.Linear(2 * WIDTH, WIDTH)
    project = layers.Linear(WIDTH, VOCAB)
    start = tape.Variable(np.full((1, WIDTH), 0.1, np.float32),
                          stop_gradient=not start_wants_grad)

    def sequence_loss(ids, targets):
        h, hs = start, []
        for x in ops.split(embed(ids), num=STEPS, axis=0):
            h = ops.tanh(cell(ops.concat([x, h], axis=1)))
            hs.append(h)
        logits = project(ops.concat(hs, axis=0))
        return ops.mean(ops.softmax_with_cross_entropy(logits, targets)[1])
    params = [*embed.params(), *cell.params(), *project.params()]
    return sequence_loss, params + ([start] if start_wants_grad else [])


def sequences(seed):
    rng = np.random.default_rng(seed)
    return [(tape.Variable(rng.integers(VOCAB, size=STEPS)),
             tape.Variable(rng.integers(VOCAB, size=(STEPS, 1))))
            for _ in range(CALLS)]


def mean_of(loss, data):
    return lambda: ops.scale(ops.sum([loss(*d) for d in data]), scale=1.0 / CALLS)


def assert_close(got, expected):
    """Loss and gradients: the stacked calls' products are one BLAS call over every call's rows,
    which may block and round differently from one call's."""
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    for a, b in zip(got[1], expected[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max())


def test_sequence_losses_run_as_one_call_forward_and_backward(kernel_calls):
    loss, params = sequence_model()
    data = sequences(0)
    traced = tape.function(loss)
    got = run_lazily(mean_of(traced, data), params)
    forward = [arrays for t, arrays in kernel_calls
               if t.startswith("function_") and not t.endswith("_grad")]
    grads = [t for t, _ in kernel_calls if t.startswith("function_") and t.endswith("_grad")]
    assert len(forward) == 1 and len(grads) == 1
    assert forward[0]["Arg0"].shape == (CALLS, STEPS)          # stacked, not concatenated
    assert forward[0]["Arg1"].shape == (CALLS, STEPS, 1)
    with batching_off():
        one_by_one = run_lazily(mean_of(traced, data), params)
    assert_close(got, one_by_one)


def test_stacked_calls_equal_the_functions_own_ops_eagerly():
    """Against eager Tape running the function's ops unwrapped, with a captured start state
    that wants a gradient: the one every call's tiled copy sums back to."""
    loss, params = sequence_model(start_wants_grad=True)
    data = sequences(1)
    got = run_lazily(mean_of(tape.function(loss), data), params)
    for p in params:
        p.grad = None
    tape.reset_global_tape()
    eager = mean_of(loss, data)()
    eager.backward()
    assert_close(got, (eager.numpy(), [p.grad.numpy() for p in params]))


def test_each_call_reads_its_own_result():
    """Every call's 0-D loss, read after the batch ran, is the call's own."""
    loss, _ = sequence_model()
    data = sequences(2)
    traced = tape.function(loss)
    with tape.lazy():
        tape.reset_global_tape()
        losses = [traced(*d) for d in data]
        ops.sum(losses).numpy()
        got = [v.numpy() for v in losses]
    tape.reset_global_tape()
    expected = [loss(*d).numpy() for d in data]
    assert all(g.shape == () for g in got)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_later_steps_give_the_first_steps_results_bit_for_bit():
    """The second step of the same graph runs its cached, written schedule."""
    loss, params = sequence_model()
    data = sequences(3)
    build = mean_of(tape.function(loss), data)
    first, second, third = (run_lazily(build, params) for _ in range(3))
    for later in (second, third):
        np.testing.assert_array_equal(later[0], first[0])
        for a, b in zip(later[1], first[1], strict=True):
            np.testing.assert_array_equal(a, b)


def test_an_op_without_a_batch_rule_leaves_the_calls_one_by_one(kernel_calls):
    """A cumulative sum along the steps has no batch rule: no stacked Graph, calls one by one,
    still right."""
    def running(x):
        return ops.mean(ops.cumsum(ops.split(x, num=2, axis=0)[0], axis=0))
    rng = np.random.default_rng(5)
    xs = [tape.Variable(floats(rng, (4, 3)), stop_gradient=False) for _ in range(CALLS)]
    traced = tape.function(running)
    got = run_lazily(lambda: ops.sum([traced(x) for x in xs]), xs)
    forward = [t for t, _ in kernel_calls if t.startswith("function_") and not t.endswith("_grad")]
    assert len(forward) == CALLS
    tape.reset_global_tape()
    for x in xs:
        x.grad = None
    eager = ops.sum([running(x) for x in xs])
    eager.backward()
    np.testing.assert_array_equal(got[0], eager.numpy())
    for x, g in zip(xs, got[1], strict=True):
        np.testing.assert_array_equal(g, x.grad.numpy())


def test_a_reduction_broadcast_back_at_an_axis_stacks(kernel_calls):
    """Y, a reduction over X's axes 0 and 2, multiplies X at axis 1 (Paddle's ``axis``): on the
    stacked forms it is given ones for X's axes 0 and 2, its calls on the new axis 0."""
    def weighted(x):
        return ops.elementwise_mul(x, ops.reduce_sum(x, dim=[0, 2]), axis=1)
    rng = np.random.default_rng(6)
    xs = [tape.Variable(floats(rng, (2, 3, 4)), stop_gradient=False) for _ in range(CALLS)]
    traced = tape.function(weighted)
    got = run_lazily(lambda: ops.sum([ops.reduce_sum(traced(x) * x) for x in xs]), xs)
    stacked = [arrays["Arg0"].shape for t, arrays in kernel_calls
               if t.startswith("function_") and not t.endswith("_grad")]
    assert stacked == [(CALLS, 2, 3, 4)]
    with batching_off():
        assert_close(got, run_lazily(lambda: ops.sum([ops.reduce_sum(weighted(x) * x)
                                                      for x in xs]), xs))


def shared_start():
    tape.seed(7)
    return tape.Variable(floats(np.random.default_rng(7), (1, WIDTH)), stop_gradient=False)


def stacked_forward_calls(kernel_calls) -> list:
    return [arrays["Arg0"].shape for t, arrays in kernel_calls
            if t.startswith("function_") and not t.endswith("_grad")]


def test_a_value_no_argument_leads_to_is_computed_once_and_tiled_where_rows_need_it(
        kernel_calls):
    """``tanh(start)`` reads only a captured Variable: computed once for every call, then
    tiled (once) for both products that concatenate it with an argument's rows; its gradient
    sums every call's back."""
    start = shared_start()

    def spread(x):
        s = ops.tanh(start)
        return ops.mean(ops.concat([row * s for row in ops.split(x, num=2, axis=0)], axis=0))
    rng = np.random.default_rng(8)
    xs = [tape.Variable(floats(rng, (2, WIDTH)), stop_gradient=False) for _ in range(CALLS)]
    traced = tape.function(spread)
    got = run_lazily(lambda: ops.sum([traced(x) for x in xs]), [start] + xs)
    assert stacked_forward_calls(kernel_calls) == [(CALLS, 2, WIDTH)]
    with batching_off():
        assert_close(got, run_lazily(lambda: ops.sum([spread(x) for x in xs]), [start] + xs))


def test_a_captured_x_under_a_y_an_argument_leads_to_stacks(kernel_calls):
    """``start - mean(x)``: the captured X gets a new axis 0 of one, broadcast over the calls'
    means; its gradient sums every call's."""
    start = shared_start()

    def offset(x):
        return ops.elementwise_sub(start, ops.mean(x)) * ops.mean(x)
    rng = np.random.default_rng(10)
    xs = [tape.Variable(floats(rng, (2, WIDTH)), stop_gradient=False) for _ in range(CALLS)]
    traced = tape.function(offset)
    got = run_lazily(lambda: ops.sum([ops.reduce_sum(traced(x)) for x in xs]), [start] + xs)
    assert stacked_forward_calls(kernel_calls) == [(CALLS, 2, WIDTH)]
    with batching_off():
        assert_close(got, run_lazily(lambda: ops.sum([ops.reduce_sum(offset(x)) for x in xs]),
                                     [start] + xs))


@pytest.mark.parametrize("case", ["a result no argument leads to",
                                  "a weight an argument gives"])
def test_functions_the_stacking_refuses_run_call_by_call(kernel_calls, case):
    start = shared_start()
    rng = np.random.default_rng(9)
    xs = [tape.Variable(floats(rng, (2, WIDTH)), stop_gradient=False) for _ in range(CALLS)]
    if case == "a result no argument leads to":
        def refused(x):
            return ops.mean(x), ops.tanh(start)
        calls, params = [(x,) for x in xs], [start] + xs
    else:
        def refused(x, w):
            return x @ w, ops.mean(x)
        ws = [tape.Variable(floats(rng, (WIDTH, WIDTH)), stop_gradient=False)
              for _ in range(CALLS)]
        calls, params = list(zip(xs, ws)), xs + ws
    traced = tape.function(refused)

    def build(f):
        return lambda: ops.sum([ops.reduce_sum(a) + ops.reduce_sum(b)
                                for a, b in (f(*args) for args in calls)])
    got = run_lazily(build(traced), params)
    assert stacked_forward_calls(kernel_calls) == [(2, WIDTH)] * CALLS
    with batching_off():
        expected = run_lazily(build(refused), params)
    np.testing.assert_array_equal(got[0], expected[0])
    for a, b in zip(got[1], expected[1], strict=True):
        np.testing.assert_array_equal(a, b)
