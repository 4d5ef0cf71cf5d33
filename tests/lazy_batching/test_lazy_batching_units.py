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
