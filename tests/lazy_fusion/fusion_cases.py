"""Values and graphs the lazy fusion tests build, and how they read them back."""
import contextlib

import numpy as np

import tape
from tape import Variable, ops


@contextlib.contextmanager
def flags(**values):
    before = tape.get_flags(list(values))
    tape.set_flags(values)
    try:
        yield
    finally:
        tape.set_flags(before)


def data(shape, dtype=np.float32, seed=0, low=0.5, high=2.0):
    return Variable(np.random.default_rng(seed).uniform(low, high, shape).astype(dtype))


def arithmetic_chain(x, c):
    """+ - * / with the previous value on either side, and scale in all three of its modes."""
    y = x * 1.0001
    y = y + 0.25
    y = ops.scale(y, scale=3.0, bias=-0.5, bias_after_scale=False)
    y = ops.scale(y, scale=0.7, bias=0.125)
    y = ops.elementwise_add(y, c)
    y = ops.elementwise_sub(c, y)
    y = ops.elementwise_mul(y, c)
    y = ops.elementwise_div(c, y)
    y = ops.elementwise_div(y, c)
    y = ops.elementwise_sub(y, c)
    return ops.sqrt(ops.square(ops.relu(y)))


def lazy_value(build, *args):
    with tape.lazy():
        tape.reset_global_tape()
        return build(*args).value()



def grads_of(build, inputs, lazy=True):
    """The gradients of reduce_sum(build(*inputs)) with respect to ``inputs`` (each a fresh
    Variable that wants a gradient), with the tape lazy or eager."""
    xs = [Variable(x.value().copy(), stop_gradient=False) for x in inputs]
    with tape.lazy() if lazy else contextlib.nullcontext():
        tape.reset_global_tape()
        ops.reduce_sum(build(*xs), reduce_all=True).backward()
    return [x.grad.value() for x in xs]


def all_steps(x, c):
    """Every exact step and its gradient, x and c each read several times (their gradients
    are sums of several parts), with no gradient NaN or infinite."""
    y = x * 1.0001 + 0.25
    y = ops.scale(y, scale=3.0, bias=-0.5, bias_after_scale=False)
    y = ops.scale(y, scale=0.7, bias=0.125)
    y = ops.elementwise_sub(c, ops.elementwise_add(y, c))
    y = ops.elementwise_div(ops.elementwise_mul(y, c), c + 3.0)
    y = ops.relu(y + 0.5) + ops.relu(ops.scale(y, scale=-1.0, bias=-0.25))
    y = ops.sqrt(ops.square(y) + 1.0)
    y = ops.elementwise_mul(y, x) + ops.elementwise_div(x, c + 3.0)
    return ops.sqrt(ops.elementwise_sub(y, x) * y + 5.0)

