"""How the autobatching tests make values and run a graph lazily, batched or not."""
import contextlib

import numpy as np

import tape


@contextlib.contextmanager
def batching_off():
    tape.set_flags({"FLAGS_lazy_batching": False})
    try:
        yield
    finally:
        tape.set_flags({"FLAGS_lazy_batching": True})


def floats(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def run_lazily(build, params):
    """Loss value and parameter gradients of ``build()`` run on a lazy tape."""
    for p in params:
        p.grad = None
    with tape.lazy():
        tape.reset_global_tape()
        loss = build()
        loss.backward()
        value = loss.numpy()
    return value, [p.grad.numpy() for p in params]


def assert_unbatched_equal_bit_for_bit(build, params, batched) -> None:
    """``build`` run unbatched gives ``batched``'s loss value and gradients bit for bit."""
    with batching_off():
        unbatched = run_lazily(build, params)
    np.testing.assert_array_equal(batched[0], unbatched[0])
    for a, b in zip(batched[1], unbatched[1], strict=True):
        np.testing.assert_array_equal(a, b)
