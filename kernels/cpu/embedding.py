"""lookup_table_v2: a numba gather that validates the ids as it copies, and a scatter-add
gradient into a dense table."""
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


@kernel("lookup_table_v2_grad")
def lookup_table_v2_grad(Ids, W, dOut, padding_idx):
    ids = _flat_ids(Ids)
    dtable = np.zeros(W.shape, W.dtype)
    dout = np.ascontiguousarray(dOut).reshape(ids.size, W.shape[1])
    bad = _scatter_add_rows(ids, dout, padding_idx, dtable)
    _raise_if_bad("lookup_table_v2_grad", bad, ids, W.shape[0])
    return dtable
