"""References for the comparisons (Paddle's axis alignment, then numpy) and where."""
import numpy as np

from .elementwise import _align


def less_than(X, Y, axis):
    x, y = _align(X, Y, axis)
    return np.less(x, y)


def less_equal(X, Y, axis):
    x, y = _align(X, Y, axis)
    return np.less_equal(x, y)


def greater_than(X, Y, axis):
    x, y = _align(X, Y, axis)
    return np.greater(x, y)


def greater_equal(X, Y, axis):
    x, y = _align(X, Y, axis)
    return np.greater_equal(x, y)


def equal(X, Y, axis):
    x, y = _align(X, Y, axis)
    return np.equal(x, y)


def not_equal(X, Y, axis):
    x, y = _align(X, Y, axis)
    return np.not_equal(x, y)


def logical_not(X):
    return np.logical_not(X)


def where(Condition, X, Y):
    return np.where(Condition, X, Y)
