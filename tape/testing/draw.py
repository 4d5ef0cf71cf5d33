"""The vocabulary an op's test case uses to draw random inputs and attributes.

An op declares ``case=fn`` at registration; ``fn(d)`` returns ``(inputs, attrs)`` where
``inputs`` maps slot names to float64/int64 numpy arrays (a list for a duplicable slot) and
``attrs`` the attributes to pass. ``d`` is a Draw: backed by hypothesis in the test suite (so
shapes and attributes shrink) or by a seeded numpy generator for users checking their own ops.
"""
from __future__ import annotations

import numpy as np


class Draw:
    """Draws test values: small integers (shapes, attributes) and array contents."""

    def __init__(self, integer, rng: np.random.Generator):
        self._integer = integer   # (low, high) -> int, inclusive bounds
        self._rng = rng           # array contents

    @classmethod
    def from_seed(cls, seed: int = 0) -> Draw:
        rng = np.random.default_rng(seed)
        return cls(lambda lo, hi: int(rng.integers(lo, hi + 1)), rng)

    @classmethod
    def from_hypothesis(cls, data) -> Draw:
        """Integers are drawn (and shrunk) by hypothesis; array contents come from a drawn seed."""
        from hypothesis import strategies as st
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="array seed"))
        return cls(lambda lo, hi: data.draw(st.integers(lo, hi)), rng)

    def integer(self, low: int, high: int) -> int:
        """An int in ``[low, high]``."""
        return self._integer(low, high)

    def boolean(self) -> bool:
        return self._integer(0, 1) == 1

    def choice(self, options):
        options = list(options)
        return options[self._integer(0, len(options) - 1)]

    def shape(self, min_rank: int = 1, max_rank: int = 3, min_side: int = 1,
              max_side: int = 4) -> tuple:
        rank = self._integer(min_rank, max_rank)
        return tuple(self._integer(min_side, max_side) for _ in range(rank))

    def _uniform(self, shape):
        return self._rng.random(shape)

    def floats(self, shape, low: float = -2.0, high: float = 2.0, away_from=None,
               margin: float = 0.05) -> np.ndarray:
        """float64 values in ``[low, high)``, at least ``margin`` from each point in ``away_from``
        (to keep finite differences off kinks such as relu's 0)."""
        x = low + (high - low) * self._uniform(shape)
        for point in away_from or ():
            near = np.abs(x - point) < margin
            x = np.where(near, point + np.where(x >= point, margin, -margin), x)
        return x

    def distinct_floats(self, shape, spacing: float = 0.05) -> np.ndarray:
        """float64 values at least ``spacing`` apart (no ties for max-like ops)."""
        n = int(np.prod(shape))
        order = np.argsort(self._uniform((n,)))
        return (order * spacing - n * spacing / 2).reshape(shape).astype(np.float64)

    def ints(self, shape, low: int, high: int) -> np.ndarray:
        """int64 values in ``[low, high]``."""
        u = self._uniform(shape)
        return np.minimum(low + np.floor(u * (high - low + 1)), high).astype(np.int64)
