"""Kernels that run numpy below a size and a numba loop from it on: both paths agree (bit for bit
where they compute the same formula), whichever size the other tests happen to use."""
import warnings

import numpy as np
import pytest

from tape.kernels.cpu import activation, elementwise, optimizer
from tape.kernels.cpu import math as matmul_kernels


@pytest.fixture(params=["numpy", "numba"])
def path(request, monkeypatch):
    """Every threshold at infinity (numpy everywhere) or 0 (numba everywhere)."""
    limit = float("inf") if request.param == "numpy" else 0
    monkeypatch.setattr(optimizer, "SGD_NUMBA_FROM", limit)
    monkeypatch.setattr(matmul_kernels, "OUTER_NUMBA_FROM", limit)
    monkeypatch.setattr(activation, "RELU_NUMBA_FROM", limit)
    monkeypatch.setattr(elementwise, "ADD_ROWS_NUMBA_FROM", limit)
    return request.param


def _values(dtype, shape=(5, 7), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    a.flat[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30]
    return a


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # its inf - inf, on purpose
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_grad_and_sgd_are_bit_for_bit_the_formulas(path, dtype):
    out, dout = np.maximum(_values(dtype), 0), _values(dtype, seed=1)[:, ::-1]
    expected = np.where(out > 0, dout, dtype(0))
    assert activation.relu_grad(out, dout).tobytes() == expected.tobytes()
    param, grad, lr = _values(dtype), _values(dtype, seed=2), np.array([0.25], dtype)
    with np.errstate(invalid="ignore"):
        expected = param - lr[0] * grad
    optimizer.sgd(param, lr, grad, None)
    assert param.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["0-d", "transposed", "3-d"])
def test_relu_is_numpys_maximum_bit_for_bit(path, dtype, layout):
    """NaN (with its sign) stays NaN, -0.0 becomes +0.0; the result has numpy's layout."""
    x = _values(dtype)
    x.flat[6] = -np.nan
    value = {"0-d": np.array(-0.0, dtype), "transposed": x.T,
             "3-d": np.concatenate([x, -x, x.T.reshape(5, 7)]).reshape(3, 5, 7)}[layout]
    out, expected = activation.relu(value), np.maximum(value, 0)
    assert out.tobytes() == expected.tobytes() and out.strides == expected.strides


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # inf + -inf, on purpose
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, y_shape, axis", [
    ((5, 7), (7,), -1), ((5, 7), (7,), 1), ((2, 5, 7), (7,), 2),
    ((7, 7), (7,), 0),          # Y along X's first dim: not a row
    ((5, 7), (1, 7), -1)])      # a 2-D Y: numpy's broadcast
def test_elementwise_add_of_a_row_is_numpys_sum_bit_for_bit(path, dtype, x_shape, y_shape, axis):
    """Linear's bias add; signed zeros, NaN and inf as numpy's."""
    x = _values(dtype, (int(np.prod(x_shape)),)).reshape(x_shape)
    y = _values(dtype, (y_shape[-1],), seed=1)[::-1].copy().reshape(y_shape)
    y_aligned = y.reshape(-1, 1) if axis == 0 else y
    assert elementwise.elementwise_add(x, y, axis).tobytes() == (x + y_aligned).tobytes()


class _DeviceArray(np.lib.mixins.NDArrayOperatorsMixin):
    """An array of another module (cupy's, on the CUDA place, which runs these kernels too):
    numpy's ufuncs and operators apply to it, numba and ``ravel`` do not."""

    def __init__(self, array):
        self.array = array

    shape = property(lambda self: self.array.shape)
    dtype = property(lambda self: self.array.dtype)
    ndim = property(lambda self: self.array.ndim)
    size = property(lambda self: self.array.size)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        arrays = [x.array if isinstance(x, _DeviceArray) else x for x in inputs]
        return _DeviceArray(getattr(ufunc, method)(*arrays, **kwargs))


def test_relu_and_bias_add_leave_another_modules_arrays_to_its_ufuncs(path):
    x, b = _values(np.float32), _values(np.float32, (7,), seed=1)
    out = activation.relu(_DeviceArray(x))
    assert type(out) is _DeviceArray and out.array.tobytes() == np.maximum(x, 0).tobytes()
    out = elementwise.elementwise_add(_DeviceArray(x), _DeviceArray(b), -1)
    assert type(out) is _DeviceArray and out.array.tobytes() == (x + b).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_outer_product_gradients_are_bit_for_bit_blas(path, dtype):
    """At batch 1 a weight's gradient is an outer product; signed zeros, NaN and inf as GEMM's."""
    x, y, dout = _values(dtype, (1, 5)), _values(dtype, (5, 7), seed=1), _values(dtype, (1, 7))
    with np.errstate(invalid="ignore"):
        dx, dy = matmul_kernels.mul_grad(x, y, dout, 1, 1, ("X@GRAD", "Y@GRAD"))
        assert dy.tobytes() == (x.T @ dout).tobytes()
        assert dx.tobytes() == (dout @ y.T).tobytes()
        _, dy = matmul_kernels.matmul_v2_grad(x, y.T, dout, False, True, ("Y@GRAD",))
        assert dy.tobytes() == (dout.T @ x).tobytes()



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (5, 7)])
def test_sigmoid_is_the_formula_bit_for_bit_without_overflow_warnings(shape, dtype):
    """In place for arrays, out of place for a 0-d input; exp(-X) = inf gives 0, silently."""
    x = _values(dtype, shape) * 1000 if shape else np.array(-1000, dtype)
    with np.errstate(over="ignore"):
        expected = 1 / (1 + np.exp(-x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.asarray(activation.sigmoid(x)).tobytes() == np.asarray(expected).tobytes()
