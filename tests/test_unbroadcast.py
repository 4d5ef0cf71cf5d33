"""Reducing a broadcast gradient (``kernels/cpu/broadcast.py``): what the cached per-shape
decision runs equals numpy's sum over the broadcast axes bit for bit, on every path (a plain
reshape, a sum over leading rows, a sum over other axes, a strided gradient)."""
import numpy as np
import pytest

from tape.kernels.cpu import broadcast

CASES = [  # (gradient shape, target shape, target aligned to the gradient's rank)
    ((64, 256), (256,), (1, 256)),          # a bias gradient: leading rows
    ((64, 10), (10,), (1, 10)),
    ((64, 1), (1,), (1, 1)),                # one column: numpy's pairwise sum
    ((3, 4, 5), (5,), (1, 1, 5)),           # two leading dims
    ((3, 4, 5), (4, 1), (1, 4, 1)),         # other axes
    ((3, 4, 5), (3, 1, 5), (3, 1, 5)),
    ((1, 7), (7,), (1, 7)),                 # batch 1: a reshape, not a sum
    ((6, 7), (6, 7), (6, 7)),               # nothing to do
]


def _gradient(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    g = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)).astype(dtype)
    g.flat[::3] = -0.0      # a column of -0.0 sums to +0.0 in numpy (it starts from 0)
    return g


def _expected(g, padded, shape):
    axes = tuple(i for i, n in enumerate(padded) if n == 1 and g.shape[i] != 1)
    return np.sum(g, axis=axes).reshape(shape) if axes else g.reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("g_shape, shape, padded", CASES)
def test_unbroadcast_is_numpys_sum_bit_for_bit(g_shape, shape, padded, dtype):
    for seed in range(2):       # the second call takes the cached decision
        g = _gradient(g_shape, dtype, seed)
        got = broadcast.unbroadcast(g, shape, padded)
        assert got.shape == shape and got.dtype == dtype
        assert got.tobytes() == _expected(g, padded, shape).tobytes()
    if len(g_shape) == 2 and g_shape[1] > 1:    # strided: numpy's general sum
        wide = _gradient((g_shape[0], 2 * g_shape[1]), dtype, 2)
        g = wide[:, ::2]
        assert broadcast.unbroadcast(g, shape, padded).tobytes() == \
            _expected(g, padded, shape).tobytes()


@pytest.mark.parametrize("g_shape, shape, padded", CASES)
def test_unbroadcast_product_is_the_product_reduced(g_shape, shape, padded):
    a, b = _gradient(g_shape, np.float64, 0), _gradient(g_shape, np.float64, 1)
    got = broadcast.unbroadcast_product(a, b, shape, padded)
    assert got.shape == shape
    np.testing.assert_allclose(got, _expected(a * b, padded, shape), rtol=1e-12, atol=1e-300)
