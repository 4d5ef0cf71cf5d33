"""Variable's Python operators, mapped onto registered ops."""
import numpy as np

from . import ops
from .variable import Variable


def _constant_like(x: Variable, value) -> Variable:
    return Variable(np.asarray(value, dtype=x.dtype))


def _add(self, other):
    if isinstance(other, Variable):
        return ops.elementwise_add(self, other)
    return ops.scale(self, scale=1.0, bias=float(other))


def _sub(self, other):
    if isinstance(other, Variable):
        return ops.elementwise_sub(self, other)
    return ops.scale(self, scale=1.0, bias=-float(other))


def _rsub(self, other):
    return ops.scale(self, scale=-1.0, bias=float(other))


def _mul(self, other):
    if isinstance(other, Variable):
        return ops.elementwise_mul(self, other)
    return ops.scale(self, scale=float(other))


def _truediv(self, other):
    if isinstance(other, Variable):
        return ops.elementwise_div(self, other)
    return ops.scale(self, scale=1.0 / float(other))


def _rtruediv(self, other):
    return ops.elementwise_div(_constant_like(self, other), self)


def _matmul(self, other):
    return ops.matmul_v2(self, other)


def _rmatmul(self, other):
    return ops.matmul_v2(Variable(other), self)


def _neg(self):
    return ops.scale(self, scale=-1.0)


Variable.__add__ = Variable.__radd__ = _add
Variable.__sub__ = _sub
Variable.__rsub__ = _rsub
Variable.__mul__ = Variable.__rmul__ = _mul
Variable.__truediv__ = _truediv
Variable.__rtruediv__ = _rtruediv
Variable.__matmul__ = _matmul
Variable.__rmatmul__ = _rmatmul
Variable.__neg__ = _neg
