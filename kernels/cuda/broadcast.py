"""Reducing a broadcast gradient to its input's shape on the GPU.

The common reduction, a sum over leading dims (a bias gradient), is one thread per column
summing down the rows (neighbouring threads read neighbouring columns); with a product fused
in (``elementwise_mul``'s gradient) it saves a temporary and a pass. Other reductions are the
array module's ``sum``. The axis bookkeeping is the CPU side's.
"""
import math

from numba import cuda

from ..cpu.broadcast import _leading_rows, _reduced_axes
from .device import array_module, launch


@cuda.jit
def _sum_rows(g, out):
    rows, width = g.shape
    for j in range(cuda.grid(1), width, cuda.gridsize(1)):
        total = 0.0
        for i in range(rows):
            total += g[i, j]
        out[j] = total


@cuda.jit
def _sum_rows_of_product(a, b, out):
    rows, width = a.shape
    for j in range(cuda.grid(1), width, cuda.gridsize(1)):
        total = 0.0
        for i in range(rows):
            total += a[i, j] * b[i, j]
        out[j] = total


def _sum_leading(loop, arrays, k, shape):
    """``loop`` over ``arrays`` seen as (rows, columns), the first ``k`` dims being the rows."""
    xp = array_module(*arrays)
    width = math.prod(arrays[0].shape[k:])
    out = xp.empty(width, arrays[0].dtype)
    launch(loop, width, *(xp.ascontiguousarray(a).reshape(-1, width) for a in arrays), out)
    return out.reshape(shape)


def unbroadcast(g, shape, padded):
    """Sum ``g`` over the dims where ``padded`` (``shape`` aligned to ``g``'s rank) is 1."""
    if g.shape == tuple(shape):
        return g
    axes = _reduced_axes(g.shape, padded)
    if not axes:
        return g.reshape(shape)
    k = _leading_rows(g.shape, axes)
    if k:
        return _sum_leading(_sum_rows, (g,), k, shape)
    return array_module(g).sum(g, axis=axes).reshape(shape)


def unbroadcast_product(a, b, shape, padded):
    """``unbroadcast(a * b, shape, padded)``, fused when it is a plain sum over leading rows."""
    if a.shape == b.shape and a.shape != tuple(shape) and a.dtype == b.dtype:
        k = _leading_rows(a.shape, _reduced_axes(a.shape, padded))
        if k:
            return _sum_leading(_sum_rows_of_product, (a, b), k, shape)
    return unbroadcast(a * b, shape, padded)
