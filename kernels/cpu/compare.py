"""less_than / less_equal / greater_than / greater_equal / equal / not_equal (numpy's comparisons
on Paddle-aligned views), where and its gradient."""
import numpy as np

from tape import dtypes
from tape.registry import kernel

from .broadcast import aligned


@kernel("less_than", types=dtypes.ALL)
def less_than(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x < y


@kernel("less_equal", types=dtypes.ALL)
def less_equal(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x <= y


@kernel("greater_than", types=dtypes.ALL)
def greater_than(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x > y


@kernel("greater_equal", types=dtypes.ALL)
def greater_equal(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x >= y


@kernel("equal", types=dtypes.ALL)
def equal(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x == y


@kernel("not_equal", types=dtypes.ALL)
def not_equal(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x != y


@kernel("logical_not", types=dtypes.ALL)
def logical_not(X):
    return ~X.astype(bool, copy=False)


# The tape picks a kernel by the first floating input, else the first input: for integer or bool
# X and Y that is Condition, so the BOOL kernel serves them.
@kernel("where", types=(dtypes.BOOL, dtypes.FP32, dtypes.FP64))
def where(Condition, X, Y):
    return np.where(Condition, X, Y)


@kernel("where_grad")
def where_grad(Condition, dOut, wants):
    zero = dOut.dtype.type(0)
    dx = np.where(Condition, dOut, zero) if "X@GRAD" in wants else None
    dy = np.where(Condition, zero, dOut) if "Y@GRAD" in wants else None
    return dx, dy
