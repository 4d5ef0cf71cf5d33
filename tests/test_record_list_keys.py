"""A lazy op's slot of several inputs that all share the first one's shape, dtype and
stop_gradient keys its plan by that one signature and the count (``lazy_runner
.gather_many_lines``); one input unlike the first, in any of the three, keys it by every
input's, as the eager runner does. Results and gradients bit for bit eager's."""
import contextlib

import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import ops

pytestmark = pytest.mark.usefixtures("unchecked")
RNG = np.random.default_rng(31)


def _pieces(shapes, dtypes, stop_gradients) -> list:
    return [tape.Variable(RNG.standard_normal(s).astype(d), stop_gradient=g)
            for s, d, g in zip(shapes, dtypes, stop_gradients)]


UNLIKE = {"shape": ([(2, 3), (2, 3), (4, 3)], ["float32"] * 3, [False] * 3),
          "dtype": ([(2, 3)] * 3, ["float64", "float64", "float32"], [True] * 3),
          "stop_gradient": ([(2, 3)] * 3, ["float32"] * 3, [True, True, False])}


@pytest.mark.parametrize("unlike", list(UNLIKE))
def test_a_list_unlike_its_first_input_after_alike_ones_records_its_own_plan(unlike):
    """Alike lists of the first input's signature first (their plan found by the short
    key), then one whose last input differs: its own plan, as eager's (the dtype case is
    refused as eager refuses it)."""
    shapes, dtypes, stop_gradients = UNLIKE[unlike]
    alike = _pieces([shapes[0]] * 3, [dtypes[0]] * 3, [stop_gradients[0]] * 3)
    pieces = _pieces(shapes, dtypes, stop_gradients)

    def run(lazy: bool):
        for v in pieces:
            v.grad = None
        with tape.lazy() if lazy else contextlib.nullcontext():
            tape.reset_global_tape()
            for _ in range(3):
                ops.concat(alike, axis=0)
            out = ops.concat(pieces, axis=0)
            result = out.numpy(), out.shape, out.stop_gradient
            if not out.stop_gradient:
                ops.reduce_sum(ops.tanh(out), reduce_all=True).backward()
        return result, [None if v.grad is None else v.grad.numpy() for v in pieces]
    if unlike == "dtype":
        for lazy in (False, True):
            with pytest.raises(tape.errors.InvalidArgumentError, match="concat"):
                run(lazy)
        return
    (value, shape, stop), grads = run(lazy=True)
    (want_value, want_shape, want_stop), want_grads = run(lazy=False)
    np.testing.assert_array_equal(value, want_value)
    assert (shape, stop) == (want_shape, want_stop)
    for g, w in zip(grads, want_grads, strict=True):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_array_equal(g, w)
