"""Collective ops in a world of one process (tests/distributed checks them on 2 ranks)."""
import numpy as np


def c_allreduce_sum(X):
    return np.array(X, copy=True)


def c_identity(X):
    return np.array(X, copy=True)


def c_broadcast(X):
    return np.array(X, copy=True)
