"""Where batched backward finds each op's unit and row (``units._place``): the tape's records
hold the unit itself while a batch's rows follow each other on that tape, else ``(unit, row)``
for every row; either way each handle meets its own rows."""
import numpy as np

import tape
from tape import Variable, batching, ops


def floats(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def _calls(monkeypatch):
    calls = []
    invoke = batching.invoke

    def counting(plan, arrays, wants=None, names=None):
        calls.append((plan.info.type, arrays))
        return invoke(plan, arrays, wants, names)
    monkeypatch.setattr(batching, "invoke", counting)
    return calls


def _eager(xs, w, held):
    """Eager gradients of the loss of ``test_a_batch_row_off_the_tape_...`` (``held``: the
    indices of the products recorded under no_grad)."""
    tape.reset_global_tape()
    xe = [Variable(x.value(), stop_gradient=False) for x in xs]
    we = Variable(w.value(), stop_gradient=False)
    products = []
    for i, x in enumerate(xe):
        if i in held:
            with tape.no_grad():
                products.append(ops.tanh(ops.mul(x, we)))
        else:
            products.append(ops.tanh(ops.mul(x, we)))
    loss = ops.reduce_sum(ops.sum(products))
    loss.backward()
    return [x.grad.numpy() if x.grad is not None else None for x in xe], we.grad.numpy()


def test_a_batch_row_off_the_tape_leaves_the_other_rows_their_handles(monkeypatch):
    """Products of one signature, one of them recorded under no_grad (no record): they run as
    one call, and backward gives each recorded row its own gradient, as eager Tape does."""
    calls = _calls(monkeypatch)
    tape.set_flags({"FLAGS_lazy_fusion": False})
    rng = np.random.default_rng(3)
    w = Variable(floats(rng, (4, 3)), stop_gradient=False)
    xs = [Variable(floats(rng, (2, 4)), stop_gradient=False) for _ in range(6)]
    held = {1, 4}
    try:
        with tape.lazy():
            tape.reset_global_tape()
            products = []
            for i, x in enumerate(xs):
                if i in held:
                    with tape.no_grad():
                        products.append(ops.tanh(ops.mul(x, w)))
                else:
                    products.append(ops.tanh(ops.mul(x, w)))
            loss = ops.reduce_sum(ops.sum(products))
            loss.backward()
    finally:
        tape.set_flags({"FLAGS_lazy_fusion": True})
    assert [arrays["X"].shape for t, arrays in calls if t == "mul"] == [(12, 4)]
    expected_xs, expected_w = _eager(xs, w, held)
    for i, (x, expected) in enumerate(zip(xs, expected_xs)):
        if i in held:
            assert x.grad is None
        else:
            np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), expected_w, rtol=1e-5, atol=1e-6)
