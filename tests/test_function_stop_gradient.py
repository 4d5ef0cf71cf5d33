"""A captured Variable whose stop_gradient changes between two calls of a ``tape.function``
on one tape: the second call is traced again and gives the gradient the flag asks for, in
eager and lazy mode, as the function's own ops recorded one by one do."""
import numpy as np
import pytest

import tape
from tape import ops


def _weight(frozen: bool):
    return tape.Variable(np.arange(9, dtype=np.float32).reshape(3, 3) / 9, stop_gradient=frozen)


def _x():
    return tape.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
                         stop_gradient=False)


def _grads(step, frozen_first: bool, calls_before: int = 3):
    """``w.grad`` and ``x.grad`` after ``calls_before`` calls with ``w.stop_gradient`` at
    ``frozen_first``, then one with it flipped, all on one tape; the loss sums every call."""
    tape.reset_global_tape()
    w, x = _weight(frozen_first), _x()
    f = step(w)
    outputs = [f(x) for _ in range(calls_before)]
    w.stop_gradient = not frozen_first
    outputs.append(f(x))
    ops.mean(ops.sum(outputs)).backward()
    return (None if w.grad is None else w.grad.numpy()), x.grad.numpy()


@pytest.mark.parametrize("frozen_first", [True, False])
def test_flipped_capture_gives_the_flags_gradient(mode, frozen_first):
    traced = _grads(lambda w: tape.function(lambda x: ops.tanh(ops.matmul_v2(x, w))),
                    frozen_first)
    plain = _grads(lambda w: (lambda x: ops.tanh(ops.matmul_v2(x, w))), frozen_first)
    assert (traced[0] is None) == (plain[0] is None)
    if plain[0] is not None:
        np.testing.assert_allclose(traced[0], plain[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(traced[1], plain[1], rtol=1e-6, atol=1e-7)


def test_unfrozen_capture_is_traced_again_and_gets_a_gradient(mode):
    tape.reset_global_tape()
    w, x = _weight(True), _x()
    f = tape.function(lambda x: ops.matmul_v2(x, w))
    f(x)
    w.stop_gradient = False
    ops.mean(f(x)).backward()
    assert w.grad is not None
    expected = np.repeat(x.numpy().sum(axis=0, keepdims=True).T / 6, 3, axis=1)
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-6, atol=1e-7)


def test_setting_the_same_flag_keeps_what_was_checked():
    from tape.variable import stop_gradient_flips
    w = _weight(True)
    before = stop_gradient_flips[0]
    w.stop_gradient = True
    assert stop_gradient_flips[0] == before
    w.stop_gradient = False
    assert stop_gradient_flips[0] == before + 1
