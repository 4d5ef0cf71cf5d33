"""The process-wide generator that random ops with ``seed=0`` draw from."""
import numpy as np

_generator = np.random.default_rng()


def seed(n: int) -> None:
    """Reseed it: ``tape.seed(0)`` makes parameter initialisation and random ops repeatable."""
    global _generator
    _generator = np.random.default_rng(n)


def generator() -> np.random.Generator:
    return _generator
