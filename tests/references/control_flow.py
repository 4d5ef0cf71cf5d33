"""Reference for increment (the control-flow ops without a kernel are checked in programs:
tests/static/test_control_flow*.py)."""
import numpy as np


def increment(X, step):
    return (X + np.asarray(step, dtype=X.dtype)).astype(X.dtype)
