"""An embedding table's gradient on CUDAPlace: each lookup adds its rows into one table there
too (``add_into`` of the GPU kernel), with the CPU's result."""
import numpy as np
import pytest

import tape
from tape import functional, ops

CPU, GPU = tape.CPUPlace(), tape.CUDAPlace(0)


def _table_gradient(place, ids, weights, table):
    w = tape.Variable(table, stop_gradient=False, place=place)
    tape.reset_global_tape()
    loss = None
    for k, c in zip(ids, weights):
        term = ops.reduce_sum(functional.embedding(tape.Variable(k, place=place), w)
                              * tape.Variable(c, place=place), reduce_all=True)
        loss = term if loss is None else loss + term
    loss.backward()
    assert w.grad.place is place
    return np.array(w.grad.value())


@pytest.mark.parametrize("checks", [False, True])
def test_lookups_sum_into_one_table_on_cuda_as_on_cpu(checks, restore_flags):
    tape.set_flags({"FLAGS_enable_unused_var_check": checks})
    rng = np.random.default_rng(0)
    table = rng.standard_normal((8, 3))
    ids = [np.array([1]), np.array([4, 6]), np.array([1]), np.array([7])]
    weights = [rng.standard_normal((len(k), 3)) for k in ids]
    expected = _table_gradient(CPU, ids, weights, table)
    # (the GPU adds with atomics, in no set order: equal within rounding)
    np.testing.assert_allclose(_table_gradient(GPU, ids, weights, table), expected, rtol=1e-14)
