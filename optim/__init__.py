"""Optimizers: update parameters by adding optimizer ops (sgd, ...)."""
from .sgd import SGD

__all__ = ["SGD"]
