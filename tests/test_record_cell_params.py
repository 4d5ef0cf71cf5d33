"""A recurrent cell on a lazy tape records with the trace made for the parameters it holds
(``layers.recurrent._Cell._recorded``): replacing any one of them mid-sequence makes the
calls after it record with the new one, forward and backward as eager's."""
import contextlib

import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import layers, ops

pytestmark = pytest.mark.usefixtures("unchecked")
INPUT, HIDDEN = 4, 5


@pytest.mark.parametrize("name", ["weight_ih", "weight_hh", "bias_ih", "bias_hh"])
def test_a_parameter_replaced_mid_sequence_is_the_one_the_calls_after_read(name):
    tape.seed(8)
    cell = layers.LSTMCell(INPUT, HIDDEN, dtype="float64")
    original, other = getattr(cell, name), getattr(layers.LSTMCell(INPUT, HIDDEN, "float64"), name)
    rng = np.random.default_rng(8)
    xs = [tape.Variable(rng.standard_normal((1, INPUT))) for _ in range(6)]

    def run(lazy: bool):
        setattr(cell, name, original)
        for p in (*cell.params(), other):
            p.grad = None
        with tape.lazy() if lazy else contextlib.nullcontext():
            tape.reset_global_tape()
            state = None
            for step, x in enumerate(xs):
                if step == 3:
                    setattr(cell, name, other)
                state = cell(x, state)
            ops.reduce_sum(state[0], reduce_all=True).backward()
            h = state[0].numpy()
        return h, [p.grad.numpy() for p in (original, other)]
    run(lazy=True)      # (traces, plans)
    (h, grads), (want_h, want_grads) = run(lazy=True), run(lazy=False)
    np.testing.assert_array_equal(h, want_h)
    for g, w in zip(grads, want_grads, strict=True):
        np.testing.assert_array_equal(g, w)
