"""Where batched backward finds each op's unit and row (``units._place``): the tape's records
hold the unit itself while a batch's rows follow each other on that tape, else ``(unit, row)``
for every row; either way each handle meets its own rows."""
import numpy as np
from batching_cases import floats

import tape
from tape import Variable, ops


def _products_loss(xs, w, held):
    """The sum of ``tanh(x @ w)`` over ``xs``, the products of the indices ``held`` recorded
    under no_grad."""
    products = []
    for i, x in enumerate(xs):
        if i in held:
            with tape.no_grad():
                products.append(ops.tanh(ops.mul(x, w)))
        else:
            products.append(ops.tanh(ops.mul(x, w)))
    return ops.reduce_sum(ops.sum(products))


def test_a_batch_row_off_the_tape_leaves_the_other_rows_their_handles(units_made):
    """Products of one signature, two of them recorded under no_grad (no record): they run as
    one call, and backward gives each recorded row its own gradient, as eager Tape does."""
    made = units_made
    rng = np.random.default_rng(3)
    w = Variable(floats(rng, (4, 3)), stop_gradient=False)
    xs = [Variable(floats(rng, (2, 4)), stop_gradient=False) for _ in range(6)]
    held = {1, 4}
    with tape.lazy():
        tape.reset_global_tape()
        _products_loss(xs, w, held).backward()
    assert [u.size for u in made if u.plan.info.type == "mul"] == [6]
    lazy = [None if x.grad is None else x.grad.numpy() for x in xs], w.grad.numpy()
    tape.reset_global_tape()
    xe = [Variable(x.value(), stop_gradient=False) for x in xs]
    we = Variable(w.value(), stop_gradient=False)
    _products_loss(xe, we, held).backward()
    for i, (x, e) in enumerate(zip(lazy[0], xe)):
        if i in held:
            assert x is None and e.grad is None
        else:
            np.testing.assert_allclose(x, e.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lazy[1], we.grad.numpy(), rtol=1e-5, atol=1e-6)


def _lazy_and_eager_gradients(build, leaves) -> tuple:
    for v in leaves:
        v.grad = None
    with tape.lazy():
        tape.reset_global_tape()
        build().backward()
    lazy = [v.grad.numpy() for v in leaves]
    for v in leaves:
        v.grad = None
    tape.reset_global_tape()
    build().backward()
    return lazy, [v.grad.numpy() for v in leaves]


def test_a_graph_that_does_not_batch_goes_by_units_where_nothing_could_fuse(units_made):
    """One sample's graph of small arrays: backward goes by units (the per-op path would defer
    and schedule every grad op for fusion that cannot happen), and its gradients are eager's
    bit for bit."""
    made = units_made
    rng = np.random.default_rng(6)
    x = Variable(floats(rng, (1, 4)), stop_gradient=False)
    w = Variable(floats(rng, (4, 4)), stop_gradient=False)
    lazy, eager = _lazy_and_eager_gradients(
        lambda: ops.reduce_sum(ops.tanh(ops.matmul_v2(x, w)) * 2.0 + x, reduce_all=True),
        [x, w])
    assert len(made) == 5   # matmul_v2, tanh, scale, elementwise_add, reduce_sum
    for a, b in zip(lazy, eager):
        np.testing.assert_array_equal(a, b)


def test_a_graph_that_does_not_batch_goes_op_by_op_where_an_op_could_fuse(units_made):
    """An op that could join a fused chain (8,192 elements: ``fusion_steps.MIN_ELEMENTS``)
    sends a graph that does not batch by the per-op path: no units; eager's gradients bit for
    bit."""
    made = units_made
    rng = np.random.default_rng(7)
    x = Variable(floats(rng, (1, 8192)), stop_gradient=False)
    lazy, eager = _lazy_and_eager_gradients(
        lambda: ops.reduce_sum(ops.tanh(x * 2.0) * x, reduce_all=True), [x])
    assert made == []
    np.testing.assert_array_equal(lazy[0], eager[0])
