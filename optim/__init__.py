"""Optimizers: update parameters by adding optimizer ops (sgd, ...)."""
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD"]
