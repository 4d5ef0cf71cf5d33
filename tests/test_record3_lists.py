"""An op's slot of several outputs (``split``) on a positional runner: each output's
stop_gradient and the handle's entries are decided once for the slot, after the outputs are
made. A tape tracing an op no gradient flows through gets outputs that want none, and keeps
the Variables themselves; an untraced tape keeps their VarDescs. Eager and lazy tapes alike;
each guard is broken here on purpose once."""
import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import ops
from tape.tape import using_tape

pytestmark = pytest.mark.usefixtures("unchecked")
RNG = np.random.default_rng(47)


@pytest.mark.parametrize("tape_class", [tape.Tape, tape.LazyTape])
@pytest.mark.parametrize("wants", [False, True])
def test_split_outputs_on_tracing_and_untraced_tapes(tape_class, wants):
    x = tape.Variable(RNG.standard_normal((4, 6)), stop_gradient=not wants)
    for tracing in (True, False):
        t = tape_class(tracing=tracing)
        with using_tape(t):
            for _ in range(3):      # (the first call makes the plan; later ones are served)
                before = len(t._ops)
                parts = ops.split(x, num=3, axis=1)
        assert [v.stop_gradient for v in parts] == [not wants] * 3
        if not (tracing or wants):
            assert len(t._ops) == before
            continue
        (h,) = t._ops[before:]
        outputs = h.entries[1:]
        if tracing:
            assert list(outputs) == parts
        else:
            assert list(outputs) == [v.desc for v in parts]
        with using_tape(t):
            values = [v.numpy() for v in parts]
        for got, want in zip(values, np.split(x.numpy(), 3, axis=1), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("unlike_at", [0, 1, 2])
def test_a_list_with_one_unlike_shape_anywhere_keys_its_own_plan(unlike_at):
    """A lazy concat's inputs alike but one in shape (first, inside or last), then a list all
    of that shape, then all of the other: each list gets its own plan, its output its own
    shape and values. (The slot is keyed by one shape only where every input has it.)"""
    small = [tape.Variable(RNG.standard_normal((2, 3))) for _ in range(3)]
    large = [tape.Variable(RNG.standard_normal((4, 3))) for _ in range(3)]
    mixed = list(small)
    mixed[unlike_at] = large[unlike_at]
    with tape.lazy():
        tape.reset_global_tape()
        outs = [ops.concat(vs, axis=0) for vs in (mixed, large, small, mixed)]
        shapes = [v.shape for v in outs]
        values = [v.numpy() for v in outs]
    for vs, shape, got in zip((mixed, large, small, mixed), shapes, values, strict=True):
        want = np.concatenate([v.numpy() for v in vs], axis=0)
        assert shape == want.shape
        np.testing.assert_array_equal(got, want)
