"""lookup_table_v2 on the GPU: a gather that validates the ids as it copies, and a scatter-add
gradient with ``cuda.atomic.add`` (ids may repeat).

The kernels are the CPU ones with the device array module and numba.cuda launches, of the same
signatures, in place of their numba loops. A thread per (id, column): a bad id lowers a flag
to its position with ``atomic.min``, which the host reads to raise the CPU kernel's error.
"""
from numba import cuda

from ..cpu import embedding as cpu
from .device import array_module, bad_flag, cuda_kernel, first_bad, launch, on_device


@cuda.jit
def _gather(ids, table, padding_idx, out, bad):
    rows, width = table.shape
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i, j = e // width, e % width
        k = ids[i]
        if not 0 <= k < rows:
            cuda.atomic.min(bad, 0, i)
            out[i, j] = 0.0
        elif k == padding_idx:
            out[i, j] = 0.0
        else:
            out[i, j] = table[k, j]


@cuda.jit
def _scatter_add(ids, dout, padding_idx, dtable, bad):
    rows, width = dtable.shape
    for e in range(cuda.grid(1), dout.size, cuda.gridsize(1)):
        i, j = e // width, e % width
        k = ids[i]
        if not 0 <= k < rows:
            cuda.atomic.min(bad, 0, i)
        elif k != padding_idx:
            cuda.atomic.add(dtable, (k, j), dout[i, j])


def _gather_rows(ids, table, padding_idx, out):
    """The CPU loop's contract: out[i] = table[ids[i]] (zeros for padding_idx); returns the
    first position whose id is not a row of table, or -1."""
    flag = bad_flag(array_module(ids), ids.size)
    launch(_gather, out.size, ids, table, padding_idx, out, flag)
    return first_bad(flag, ids.size)


def _scatter_add_rows(ids, dout, padding_idx, dtable):
    """The CPU loop's contract: dtable[ids[i]] += dout[i] but for padding_idx; returns the first
    position whose id is not a row of dtable, or -1."""
    flag = bad_flag(array_module(ids), ids.size)
    launch(_scatter_add, dout.size, ids, dout, padding_idx, dtable, flag)
    return first_bad(flag, ids.size)


_flat_ids = on_device(cpu._flat_ids)
cuda_kernel("lookup_table_v2")(on_device(cpu.lookup_table_v2, _flat_ids=_flat_ids,
                                         _gather_rows=_gather_rows))
_add_rows = on_device(cpu._add_rows, _flat_ids=_flat_ids, _scatter_add_rows=_scatter_add_rows)
lookup_table_v2_grad = on_device(cpu.lookup_table_v2_grad, _add_rows=_add_rows)
lookup_table_v2_grad.add_into = on_device(cpu.add_rows_into, _add_rows=_add_rows)
cuda_kernel("lookup_table_v2_grad")(lookup_table_v2_grad)
