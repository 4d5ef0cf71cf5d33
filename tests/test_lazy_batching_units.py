"""Where batched backward finds each op's unit and row (``units._place``): the tape's records
hold the unit itself while a batch's rows follow each other on that tape, else ``(unit, row)``
for every row; either way each handle meets its own rows."""
import numpy as np

import tape
from tape import Variable, batching, ops, units


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


def _counting_units(monkeypatch) -> list:
    made = []
    unit_init = units.Unit.__init__

    def counting(self, *args, **kwargs):
        made.append(self)
        unit_init(self, *args, **kwargs)
    monkeypatch.setattr(units.Unit, "__init__", counting)
    return made


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


def test_a_graph_that_does_not_batch_goes_by_units_where_nothing_could_fuse(monkeypatch):
    """One sample's graph of small arrays: backward goes by units (the per-op path would defer
    and schedule every grad op for fusion that cannot happen), and its gradients are eager's
    bit for bit."""
    made = _counting_units(monkeypatch)
    rng = np.random.default_rng(6)
    x = Variable(floats(rng, (1, 4)), stop_gradient=False)
    w = Variable(floats(rng, (4, 4)), stop_gradient=False)
    lazy, eager = _lazy_and_eager_gradients(
        lambda: ops.reduce_sum(ops.tanh(ops.matmul_v2(x, w)) * 2.0 + x, reduce_all=True),
        [x, w])
    assert len(made) == 5   # matmul_v2, tanh, scale, elementwise_add, reduce_sum
    for a, b in zip(lazy, eager):
        np.testing.assert_array_equal(a, b)


def test_a_graph_that_does_not_batch_goes_op_by_op_where_an_op_could_fuse(monkeypatch):
    """An op that could join a fused chain (8,192 elements: ``fusion_steps.MIN_ELEMENTS``)
    sends a graph that does not batch by the per-op path: no units; eager's gradients bit for
    bit."""
    made = _counting_units(monkeypatch)
    rng = np.random.default_rng(7)
    x = Variable(floats(rng, (1, 8192)), stop_gradient=False)
    lazy, eager = _lazy_and_eager_gradients(
        lambda: ops.reduce_sum(ops.tanh(x * 2.0) * x, reduce_all=True), [x])
    assert made == []
    np.testing.assert_array_equal(lazy[0], eager[0])
