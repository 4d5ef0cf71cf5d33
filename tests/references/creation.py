"""References for the creation ops; property checks of the random ones."""
import math

import numpy as np

from tape import dtypes
from tape.testing import run_op

_SAMPLE = 20000   # elements drawn to check a random op's mean and spread


def _shape(shape, ShapeTensor=None, ShapeTensorList=None):
    if ShapeTensor is not None:
        return [int(n) for n in ShapeTensor]
    if ShapeTensorList:
        return [int(t.item()) for t in ShapeTensorList]
    return list(shape)


def fill_constant(shape, dtype, value, str_value="", ValueTensor=None, ShapeTensor=None,
                  ShapeTensorList=None):
    shape = _shape(shape, ShapeTensor, ShapeTensorList)
    if ValueTensor is not None:
        value = ValueTensor.item()
    elif str_value:
        value = int(str_value) if str_value.lstrip("-").isdigit() else float(str_value)
    return np.full(shape, np.array(value).astype(dtypes.to_numpy(dtype)))


def _check_common(op_type, out, attrs, inputs):
    expected = tuple(_shape(attrs["shape"], **inputs))
    assert out.shape == expected, f"{op_type}: shape {out.shape}, attrs {attrs}"
    assert out.dtype == dtypes.to_numpy(attrs["dtype"]), f"{op_type}: dtype {out.dtype}"
    assert np.all(np.isfinite(out)), f"{op_type}: non-finite values {out}"


def _sample(op_type, attrs, **override):
    """A large float64 draw with the same distribution attributes."""
    big = {**attrs, "shape": [_SAMPLE], "dtype": dtypes.FP64, **override}
    return run_op(op_type, {}, big)["Out"][0].value()


def _check_spread(op_type, sample, mean, std):
    tolerance = 6 * std / math.sqrt(sample.size)   # six standard errors
    assert abs(sample.mean() - mean) <= tolerance, f"{op_type}: mean {sample.mean()} vs {mean}"
    assert abs(sample.std() - std) <= 0.05 * std + 1e-12, f"{op_type}: std {sample.std()} vs {std}"


def _check_seeding(op_type, attrs):
    """A nonzero seed reproduces its draw, another seed differs, seed 0 draws afresh each time
    (for a distribution that is not a single point)."""
    seeded = _sample(op_type, attrs, seed=1234)
    assert np.array_equal(seeded, _sample(op_type, attrs, seed=1234)), f"{op_type}: seed 1234"
    assert not np.array_equal(seeded, _sample(op_type, attrs, seed=1235)), f"{op_type}: seeds"
    assert not np.array_equal(_sample(op_type, attrs, seed=0), _sample(op_type, attrs, seed=0)), \
        f"{op_type}: seed 0 gave the same values twice"


def check_uniform_random(outputs, attrs, inputs):
    low, high = attrs["min"], attrs["max"]
    _check_common("uniform_random", outputs, attrs, inputs)
    flat = outputs.reshape(-1).astype(np.float64)
    step = attrs["diag_step"] + 1
    diagonal = np.zeros(flat.size, bool)
    diagonal[:attrs["diag_num"] * step:step] = True
    assert np.all(flat[diagonal] == attrs["diag_val"]), f"uniform_random: diagonal {flat}"
    assert np.all((flat[~diagonal] >= low) & (flat[~diagonal] <= high)), \
        f"uniform_random: values outside [{low}, {high}]: {flat}"
    sample = _sample("uniform_random", attrs, diag_num=0)
    assert low <= sample.min() and sample.max() <= high, "uniform_random: sample out of range"
    _check_spread("uniform_random", sample, (low + high) / 2, (high - low) / math.sqrt(12))
    if low < high:
        _check_seeding("uniform_random", attrs)


def check_gaussian_random(outputs, attrs, inputs):
    _check_common("gaussian_random", outputs, attrs, inputs)
    _check_spread("gaussian_random", _sample("gaussian_random", attrs), attrs["mean"], attrs["std"])
    if attrs["std"] > 0:
        _check_seeding("gaussian_random", attrs)


def fill_any_like(X, value, dtype):
    return np.full(X.shape, value).astype(X.dtype if dtype == -1 else dtypes.to_numpy(dtype))


def assign_value(shape, dtype, values):
    return np.array(values).astype(dtypes.to_numpy(dtype)).reshape(shape)


def range(Start, End, Step):   # noqa: A001  (the op's name)
    start, end, step = Start.item(), End.item(), Step.item()
    size = math.ceil(abs((end - start) / step))
    return (start + step * np.arange(size)).astype(Start.dtype)


def shape(Input):
    return np.array(Input.shape, np.int32)
