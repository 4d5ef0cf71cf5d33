"""Reducing a broadcast gradient to its input's shape on the GPU.

``unbroadcast`` and ``unbroadcast_product`` are the CPU ones with the device array module and
numba.cuda launches in place of their numba loops. The common reduction, a sum over leading
dims (a bias gradient), runs a thread per column summing down the rows (neighbouring threads
read neighbouring columns); with a product fused in (``elementwise_mul``'s gradient) it saves a
temporary and a pass. Other reductions are the array module's ``sum``.
"""
from numba import cuda

from ..cpu import broadcast as cpu
from .device import DEVICE, launch, on_device


@cuda.jit
def _sum_rows_kernel(g, out):
    rows, width = g.shape
    for j in range(cuda.grid(1), width, cuda.gridsize(1)):
        total = 0.0
        for i in range(rows):
            total += g[i, j]
        out[j] = total


@cuda.jit
def _sum_rows_of_product_kernel(a, b, out):
    rows, width = a.shape
    for j in range(cuda.grid(1), width, cuda.gridsize(1)):
        total = 0.0
        for i in range(rows):
            total += a[i, j] * b[i, j]
        out[j] = total


def _sum_rows(g):
    out = DEVICE.empty(g.shape[1], g.dtype)
    launch(_sum_rows_kernel, out.size, g, out)
    return out


def _sum_rows_of_product(a, b, out):
    launch(_sum_rows_of_product_kernel, out.size, a, b, out)
    return out


unbroadcast = on_device(cpu.unbroadcast, _sum_rows=_sum_rows)
unbroadcast_product = on_device(cpu.unbroadcast_product, unbroadcast=unbroadcast,
                                _sum_rows_of_product=_sum_rows_of_product)
