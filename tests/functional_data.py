"""Data and helpers the tape.functional tests share (tests/test_functional*.py): one generator,
so the arrays are the same wherever a test runs."""
import numpy as np

import tape

RNG = np.random.default_rng(0)
V = tape.Variable
LOGITS = RNG.standard_normal((6, 5))
LABELS = np.array([1, 0, 4, 2, 2, 3])
WEIGHT = RNG.uniform(0.5, 2.0, 5)
PROBS = RNG.uniform(0.05, 0.95, (4, 3))
TARGETS = RNG.uniform(0.0, 1.0, (4, 3))


def value(v):
    assert isinstance(v, tape.Variable)
    return v.value()


def log_softmax_ref(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))
