"""The lazy recorder of a traced function (``positional.make_bound``) where its signature
wants a gradient: a call in a ``no_grad`` block is refused (the general path records nothing
and its outputs want no gradient), and an argument is stale only when it is an op output of
another tape (a leaf, or an output of this tape, is recorded). Each guard is broken here on
purpose once: the results must be the general path's and eager's where it holds."""
import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import layers, ops
from tape.errors import PreconditionNotMetError

pytestmark = pytest.mark.usefixtures("unchecked")
RNG = np.random.default_rng(43)


def _affine():
    linear = layers.Linear(3, 3, dtype="float64")
    return linear, tape.function(lambda x: ops.tanh(linear(x)))


def _recorded_around(f, x, frozen_call: bool):
    """Values and the tape's handle count of 3 calls, one in a no_grad block (``frozen_call``),
    one more, and backward of the recorded calls' mean."""
    with tape.lazy():
        t = tape.reset_global_tape()
        recorded = [f(x) for _ in range(3)]
        assert f.recorder is not None
        counts = [len(t._ops)]
        frozen = []
        if frozen_call:
            with tape.no_grad():
                frozen.append(f(x))
            counts.append(len(t._ops))
        after = f(x)
        counts.append(len(t._ops))
        assert not after.stop_gradient and all(y.stop_gradient for y in frozen)
        ops.mean(ops.sum([*recorded, after])).backward()
        return [y.numpy() for y in (*recorded, *frozen, after)], counts


def test_a_call_in_a_no_grad_block_after_recorded_calls_records_nothing():
    linear, f = _affine()
    weight = linear.params()[0]
    x = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)
    values, counts = _recorded_around(f, x, frozen_call=True)
    grad, weight.grad = weight.grad.numpy(), None
    assert counts == [counts[0], counts[0], counts[0] + 1]
    _, _ = _recorded_around(f, x, frozen_call=False)
    np.testing.assert_array_equal(grad, weight.grad.numpy())
    tape.reset_global_tape()
    want = f(x).numpy()
    for v in values:
        np.testing.assert_array_equal(v, want)


def test_leaf_and_current_arguments_are_recorded_and_a_stale_one_refused():
    """A leaf wanting a gradient (``_tape`` 0) and an output of this tape are recorded by the
    recorder; an output of a reset tape is refused (None), and the general path raises its
    error at the call."""
    _, f = _affine()
    leaf = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)
    with tape.lazy():
        t = tape.reset_global_tape()
        f(leaf), f(leaf)    # (traced, then served by the recorder)
        record = f.recorder
        (current,) = chained = [record(t, (leaf,))]
        for _ in range(3):
            chained.append(current := record(t, (current,)))
        assert all(y is not None for y in chained)
        values = [y.numpy() for y in chained]
        t = tape.reset_global_tape()
        assert record(t, (chained[-1],)) is None
        with pytest.raises(PreconditionNotMetError, match=r"input 'Arg0' \(\w+\) was computed "
                                                          "on a tape that has since been reset"):
            f(chained[-1])
    tape.reset_global_tape()
    want = leaf
    for v in values:
        want = f(want)
        np.testing.assert_array_equal(v, want.numpy())
