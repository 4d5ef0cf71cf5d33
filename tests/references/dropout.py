"""Property check of dropout: kept elements scaled, dropped ones zero, the drop rate, seeds."""
import math

import numpy as np

import tape
from tape.testing import run_op

_SAMPLE = 20000   # elements of the sample that checks the drop rate


def _factor(attrs):
    """Out / X for a kept element while training."""
    p = attrs["dropout_prob"]
    if attrs["dropout_implementation"] == "downgrade_in_infer":
        return 1.0
    return 0.0 if p == 1.0 else 1.0 / (1.0 - p)


def _sample(attrs, **override):
    """Out and Mask of dropout over ``_SAMPLE`` ones."""
    out = run_op("dropout", {"X": np.ones(_SAMPLE)}, {**attrs, **override})
    return out["Out"][0].value(), out["Mask"][0].value()


def _check_rate(attrs):
    out, mask = _sample(attrs)
    assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}, mask
    np.testing.assert_allclose(out, mask * _factor(attrs), rtol=1e-12)
    p = attrs["dropout_prob"]
    tolerance = 6 * math.sqrt(p * (1 - p) / _SAMPLE)   # six standard errors
    assert abs((1 - mask.mean()) - p) <= tolerance, f"dropped {1 - mask.mean()}, expected {p}"


def _check_seeds(attrs):
    """A fixed seed repeats its mask and another seed changes it; seed 0 draws from the process
    generator, so tape.seed repeats it."""
    first, second = _sample(attrs, fix_seed=True, seed=7)[1], _sample(attrs, fix_seed=True,
                                                                       seed=7)[1]
    assert np.array_equal(first, second)
    if 0 < attrs["dropout_prob"] < 1:
        assert not np.array_equal(first, _sample(attrs, fix_seed=True, seed=8)[1])
        masks = []
        for _ in range(2):
            tape.seed(11)
            masks.append(_sample(attrs, fix_seed=False, seed=0)[1])
        masks.append(_sample(attrs, fix_seed=False, seed=0)[1])
        assert np.array_equal(masks[0], masks[1]) and not np.array_equal(masks[1], masks[2])


def check_dropout(outputs, attrs, inputs):
    x, out = inputs["X"], outputs
    assert out.shape == x.shape, f"Out {out.shape} vs X {x.shape}"
    p = attrs["dropout_prob"]
    rtol = 1e-6 if out.dtype == np.float32 else 1e-12
    if attrs["is_test"]:
        keep = 1.0 - p if attrs["dropout_implementation"] == "downgrade_in_infer" else 1.0
        np.testing.assert_allclose(out, x * keep, rtol=rtol)
        return
    kept = out != 0
    np.testing.assert_allclose(out[kept], x[kept] * _factor(attrs), rtol=rtol)
    _check_rate(attrs)
    _check_seeds(attrs)
