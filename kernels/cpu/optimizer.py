"""sgd: one fused in-place pass (2x numpy's two passes on a 1024x1024 float32 parameter)."""
import numpy as np

from tape import dtypes
from tape.registry import kernel

from ..jit import njit

_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@njit
def _descend_fused(param, grad, lr):
    for i in range(param.size):
        param[i] -= lr * grad[i]


def _descend(target, grad, learning_rate):
    """``target -= learning_rate * grad`` in place, in one pass when the layout allows."""
    lr = target.dtype.type(learning_rate.reshape(-1)[0])
    if target.dtype == grad.dtype and target.dtype in _FUSED_DTYPES and target.flags.c_contiguous:
        _descend_fused(target.reshape(-1), grad.reshape(-1), lr)
    else:
        target -= lr * grad


@kernel("sgd", types=dtypes.FLOATING)
def sgd(Param, LearningRate, Grad, MasterParam):
    if MasterParam is None:
        _descend(Param, Grad, LearningRate)
        return Param, None
    _descend(MasterParam, Grad, LearningRate)
    Param[...] = MasterParam
    return Param, MasterParam
