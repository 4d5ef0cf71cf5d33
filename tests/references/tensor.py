"""References for assign, reshape2, transpose2, cast."""
import math

import numpy as np

from tape import dtypes


def assign(X):
    return np.array(X, copy=True)


def reshape2(X, shape):
    target = list(shape)
    for i, n in enumerate(target):
        if n == 0:
            target[i] = X.shape[i]
    if -1 in target:
        i = target.index(-1)
        target[i] = X.size // math.prod(n for j, n in enumerate(target) if j != i)
    return np.reshape(X, target)


def transpose2(X, axis):
    return np.transpose(X, axis)


def cast(X, out_dtype):
    return X.astype(dtypes.to_numpy(out_dtype))
