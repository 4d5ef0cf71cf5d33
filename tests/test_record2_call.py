"""``Function.__call__`` on a lazy tape asks the recorder that served the function's last
call, whatever its number of arguments: a recorder refuses another number (None, for the
written call to serve), so calls alternating between numbers of arguments record each with
its own recorder, with eager's values."""
import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401  (the fixture every test here uses)

import tape
from tape import ops

pytestmark = pytest.mark.usefixtures("unchecked")
RNG = np.random.default_rng(41)


def test_the_last_calls_recorder_is_asked_and_refuses_another_number_of_arguments():
    f = tape.function(lambda *vs: ops.sum([ops.tanh(v) for v in vs]))
    a = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)
    with tape.lazy():
        t = tape.reset_global_tape()
        for _ in range(3):
            f(a)
        one = f.recorder
        assert one is f.recorders[1]
        assert one(t, (a, a)) is None and one(t, ()) is None
        for _ in range(3):
            f(a, a)
        two = f.recorder
        assert two is f.recorders[2] and two is not one
        assert two(t, (a,)) is None
        calls = [(a,), (a, a), (a,), (a, a, a), (a,), (a, a)]
        results = [f(*args) for args in calls]
        values = [r.numpy() for r in results]
    for args, got in zip(calls, values, strict=True):
        np.testing.assert_array_equal(got, sum(np.tanh(v.numpy()) for v in args))


def test_a_function_traced_again_forgets_its_last_recorder():
    scale = tape.Variable(RNG.standard_normal((1, 3)))
    f = tape.function(lambda x: ops.tanh(x * scale))
    x = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)
    with tape.lazy():
        tape.reset_global_tape()
        for _ in range(3):
            f(x)
        assert f.recorder is not None
        scale.stop_gradient = False         # (traced again at the next call)
        (trace,) = f.traces.values()
        f(x)
        (again,) = f.traces.values()
        assert again is not trace and f.recorder is None
