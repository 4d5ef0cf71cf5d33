"""Calling a tape.function: ``Function.__call__`` asks the recorder that served its last call
on as many arguments itself (on a lazy tape only), hands the arguments on as one tuple, and
the recorder checks an argument's staleness only where its signature wants a gradient, and a
captured constant's stop_gradient on every call. Each guard is broken here on purpose: the
results must equal eager ones (or the general path's error) where it holds, and change where
it did not."""
import threading

import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import layers, ops
from tape.errors import PreconditionNotMetError

pytestmark = pytest.mark.usefixtures("unchecked")
RNG = np.random.default_rng(21)


def _affine():
    linear = layers.Linear(3, 3, dtype="float64")
    return linear, tape.function(lambda x: ops.tanh(linear(x)))


def test_a_call_on_an_eager_tape_after_lazy_calls_runs_its_ops_eagerly():
    """The function's recorder served the lazy calls; on an eager tape it is not asked (it
    records a LazyOp on a lazy tape's records), and the call computes its value at once."""
    _, f = _affine()
    x = tape.Variable(RNG.standard_normal((2, 3)))
    with tape.lazy():
        tape.reset_global_tape()
        lazy = [f(x) for _ in range(4)][-1].numpy()
    assert f.recorders
    tape.reset_global_tape()
    eager = f(x)
    assert not eager.pending
    np.testing.assert_array_equal(eager.numpy(), lazy)


def test_a_first_call_on_a_new_thread_makes_the_threads_tape():
    _, f = _affine()
    x = tape.Variable(RNG.standard_normal((2, 3)))
    got = []
    thread = threading.Thread(target=lambda: got.append(f(x).numpy()))
    thread.start()
    thread.join()
    tape.reset_global_tape()
    np.testing.assert_array_equal(got[0], f(x).numpy())


def test_an_argument_wanting_no_gradient_from_a_spent_tape_is_read_as_the_general_path_reads_it():
    """An op output of an earlier tape is stale only where it wants a gradient: frozen, it
    is a constant to the recorder as to the general path, and to eager."""
    _, f = _affine()
    with tape.lazy():
        tape.reset_global_tape()
        old = f(tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False))
        old.stop_gradient = True
        value = old.numpy()
        tape.reset_global_tape()
        got = [f(old) for _ in range(5)]
        values = [y.numpy() for y in got]
        old.stop_gradient = False
        with pytest.raises(PreconditionNotMetError, match=r"input 'Arg0' \(\w+\) was computed "
                                                          "on a tape that has since been reset"):
            f(old)
    tape.reset_global_tape()
    want = f(tape.Variable(value)).numpy()
    for v in values:
        np.testing.assert_array_equal(v, want)


def test_the_recorder_refuses_a_call_once_a_captured_constant_wants_a_gradient():
    """A captured leaf that wanted no gradient when traced: once it wants one, the plan the
    recorder bound for the tape no longer holds (its outputs would want none), so the call
    is left to the general path, which traces again or says why it cannot."""
    scale = tape.Variable(RNG.standard_normal((1, 3)))
    f = tape.function(lambda x: ops.tanh(x * scale))
    x = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)
    with tape.lazy():
        t = tape.reset_global_tape()
        for _ in range(3):
            f(x)
        (record,) = f.recorders.values()
        assert record(t, (x,)) is not None
        scale.stop_gradient = False
        assert record(t, (x,)) is None
        scale.stop_gradient = True
        assert record(t, (x,)) is not None
