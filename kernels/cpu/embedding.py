"""lookup_table_v2: a numba gather that validates the ids as it copies, and a scatter-add
gradient into a dense table.

The gradient also adds into a table it is given (``add_into``): eager backward sums the
gradients of an embedding looked up once per leaf of a tree into one table, so each lookup
costs its rows, not a zeroed table and a sum over the whole of it.
"""
import numpy as np

from tape.errors import InvalidArgumentError
from tape.registry import kernel

from ..jit import njit


@njit
def _gather_rows(ids, table, padding_idx, out):
    """out[i] = table[ids[i]] (zeros for padding_idx). Returns the first position whose id is
    not a row of table, or -1."""
    rows = table.shape[0]
    for i in range(ids.size):
        k = ids[i]
        if not 0 <= k < rows:
            return i
        if k == padding_idx:
            out[i, :] = 0
        else:
            out[i, :] = table[k, :]
    return -1


@njit
def _scatter_add_rows(ids, dout, padding_idx, dtable):
    """dtable[ids[i]] += dout[i], skipping padding_idx. Returns the first position whose id is
    not a row of dtable, or -1."""
    rows, width = dtable.shape
    for i in range(ids.size):
        k = ids[i]
        if not 0 <= k < rows:
            return i
        if k != padding_idx:
            for j in range(width):
                dtable[k, j] += dout[i, j]
    return -1


def _raise_if_bad(op, position, ids, rows):
    if position >= 0:
        raise InvalidArgumentError(f"{op}: Ids holds {ids[position]}, which is not a row of W "
                                   f"(expected 0 <= id < {rows})")


def _flat_ids(Ids):
    return np.ascontiguousarray(Ids).reshape(-1)


@kernel("lookup_table_v2")
def lookup_table_v2(Ids, W, padding_idx):
    ids = _flat_ids(Ids)
    out = np.empty((ids.size, W.shape[1]), W.dtype)
    bad = _gather_rows(ids, np.ascontiguousarray(W), padding_idx, out)
    _raise_if_bad("lookup_table_v2", bad, ids, W.shape[0])
    return out.reshape(Ids.shape + W.shape[1:])


def _add_rows(dtable, Ids, dOut, padding_idx):
    """dtable[Ids[i]] += dOut[i] in place, skipping padding_idx."""
    ids = _flat_ids(Ids)
    dout = np.ascontiguousarray(dOut).reshape(ids.size, dtable.shape[1])
    bad = _scatter_add_rows(ids, dout, padding_idx, dtable)
    _raise_if_bad("lookup_table_v2_grad", bad, ids, dtable.shape[0])


@kernel("lookup_table_v2_grad")
def lookup_table_v2_grad(Ids, W, dOut, padding_idx):
    dtable = np.zeros(W.shape, W.dtype)
    _add_rows(dtable, Ids, dOut, padding_idx)
    return dtable


def add_rows_into(targets, Ids, W, dOut, padding_idx):
    """``lookup_table_v2_grad`` added into ``targets[0]``, a W-shaped array, in place."""
    _add_rows(targets[0], Ids, dOut, padding_idx)


lookup_table_v2_grad.add_into = add_rows_into
