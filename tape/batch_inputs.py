"""Gathering the inputs of a batch of lazy ops (``tape.batching``): each op's argument,
concatenated along axis 0, where runs of successive ops reading rows of one earlier batch's
output take them from that output at once (whole, a slice or one fancy index); and, on the
way, where those rows came from, for batched backward (``Unit.sources``, ``tape.units``).
"""
from __future__ import annotations

from .pending import ShapeOnly, read, row_index


def gathered(ops: list, slot: str, concatenate, index: int = -1, sources=None):
    """Argument ``slot`` (its entry ``index`` if it is a list) of every op of the batch
    ``ops``, concatenated along axis 0 (None if one of them is None). Where
    successive ops read the same output of ops of one earlier batch, their rows are taken
    from that batch's whole output at once, and nothing is concatenated when one such run
    covers all of it: the output itself (in row order), a slice, or one fancy index.
    ``sources``, a list, gets the argument's ``Unit.sources`` pieces on the way (the ops of
    an earlier batch share its unit; None where one has no unit, ``tape.units``)."""
    pieces = []
    rows = whole = k = j = batch = None
    row = -1
    for op in ops:
        row += 1
        a = op.args[slot] if index < 0 else op.args[slot][index]
        if type(a) is tuple:
            d = a[0]
            if d.results is whole and a[1] == k and a[2] == j:
                rows.append(d.row)
                continue
            if rows is not None:
                pieces.append(_rows_of(whole, k, j, batch, rows))
            batch = d.batch
            if batch is not None and a[1] not in batch[1]:
                whole, k, j, rows = d.results, a[1], a[2], [d.row]
                if sources is not None:
                    _add_source(sources, d, k, j, rows)
                continue
            rows = whole = None
            value = read(a)
            if value is None:       # (a part a batch summed into another op's part)
                return None
            if sources is not None:
                _add_source(sources, d, a[1], a[2])
            pieces.append(value)
        else:
            if rows is not None:
                pieces.append(_rows_of(whole, k, j, batch, rows))
                rows = whole = None
            if sources is not None:
                sources.append((None, row))
            pieces.append(a)
    if rows is not None:
        pieces.append(_rows_of(whole, k, j, batch, rows))
    return pieces[0] if len(pieces) == 1 else concatenate(pieces)


def _add_source(sources: list, d, k: int, j: int, rows: list | None = None) -> None:
    """A ``Unit.sources`` piece: rows ``rows`` (the list a run of ``_gathered`` extends; by
    default ``d``'s row) of output ``k`` (index ``j``) of ``d``'s unit; None if ``d`` ran
    without one."""
    unit = d.unit
    unit = unit() if unit is not None else None
    sources.append(None if unit is None else (unit, k, j, [d.row] if rows is None else rows))


def column(ops: list, slot: str, concatenate, index: int, sources=None):
    """``gathered``, or where a part is None, the other parts concatenated."""
    value = gathered(ops, slot, concatenate, index, sources)
    return value if value is not None else _gathered_reads(ops, slot, concatenate, index)


def _gathered_reads(ops: list, slot: str, concatenate, index: int):
    values = (read(a) if type(a) is tuple else a.array() if type(a) is ShapeOnly else a
              for a in (op.args[slot] if index < 0 else op.args[slot][index] for op in ops))
    return concatenate([v for v in values if v is not None])


_in_order: dict = {}


def _rows_of(whole: tuple, k: int, j: int, batch: tuple, rows: list):
    """Rows ``rows`` (op places in ``batch``, ``(size, sums, offsets, stacked)`` of
    ``LazyOp.batch``) of a batch's output ``k`` (index ``j`` of it if it is a list), in that
    order, concatenated along axis 0."""
    value = whole[k] if j < 0 else whole[k][j]
    size, _, offsets, stacked = batch
    in_order = _in_order.get(size)
    if in_order is None:
        in_order = _in_order[size] = list(range(size))
    count = len(rows)
    if stacked:     # (each op's value is a block along the new axis 0)
        first = rows[0]
        value = value if count == size and rows == in_order else \
            value[first:first + count] if rows == in_order[first:first + count] else value[rows]
        return value.reshape((-1,) + value.shape[2:])
    if count == size and rows == in_order:
        return value
    if offsets is not None:
        first = rows[0]
        if rows == in_order[first:first + count]:
            return value[offsets[first]:offsets[first + count]]
        return value[row_index(offsets, rows)]
    shape = value.shape
    per_op = shape[0] // size
    first = rows[0]
    if rows == in_order[first:first + count]:
        return value[first * per_op:(first + count) * per_op]
    if per_op == 1:
        return value[rows]
    return value.reshape((size, per_op) + shape[1:])[rows].reshape(
        (count * per_op,) + shape[1:])
