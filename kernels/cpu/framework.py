"""feed, fetch and fill_zeros_like."""
import numpy as np

from tape import dtypes
from tape.registry import kernel


@kernel("feed", types=dtypes.ALL)
def feed(X, col):
    return X[col]


@kernel("fetch", types=dtypes.ALL)
def fetch(X):
    return np.array(X, copy=True)


@kernel("fill_zeros_like", types=dtypes.ALL)
def fill_zeros_like(X):
    return np.zeros_like(X)
