"""References for feed, fetch and fill_zeros_like."""
import numpy as np


def feed(X, col):
    return X[col]


def fetch(X, col):
    return X


def fill_zeros_like(X):
    return np.zeros(X.shape, X.dtype)
