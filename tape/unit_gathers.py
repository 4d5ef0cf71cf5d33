"""A batch's input gathers written out for ``tape.unit_forward``: ``batch_inputs._rows_of``
and ``batch_inputs._in_op_order`` as the Python expressions they come to for one graph,
whose rows, places and shapes are fixed, each index array made once.

Each takes what its ``batch_inputs`` counterpart takes the same way (the output itself, a
slice, a fancy index along axis 0 with the same rows, the same reshapes), so the kernels get
the same arrays, views where those were views (tests/lazy_fusion/test_unit_written.py
compares them branch by branch).
"""
from __future__ import annotations

import numpy as np

from .pending import row_index


class Unwritable(Exception):
    """A batch of a kind the written forward does not take: the recipes' path stays."""


def rows_code(value: str, shape: tuple, batch: tuple, rows: list, constant) -> tuple:
    """``(expression, its rows along axis 0)``: rows ``rows`` of ``value``, an output of
    shape ``shape`` of a batch (``batch``: ``LazyOp.batch``), as ``_rows_of`` takes them;
    ``constant(x)`` names an object in the written function's namespace."""
    size, _, offsets, stacked = batch
    count, first = len(rows), rows[0]
    run = rows == list(range(first, first + count))    # (rows in order, one after another)
    if stacked:     # (each op's value a block along axis 0, its rows along axis 1)
        taken = value if count == size and run else \
            f"{value}[{first}:{first + count}]" if run else f"{value}[{_index(rows, constant)}]"
        return f"{taken}.reshape({(-1,) + shape[2:]})", count * shape[1]
    if count == size and run:
        return value, shape[0]
    if offsets is not None:
        if run:
            return f"{value}[{offsets[first]}:{offsets[first + count]}]", \
                offsets[first + count] - offsets[first]
        index = row_index(offsets, rows)
        return f"{value}[{constant(index)}]", len(index)
    per_op = shape[0] // size
    if run:
        return f"{value}[{first * per_op}:{(first + count) * per_op}]", count * per_op
    if per_op == 1:
        return f"{value}[{_index(rows, constant)}]", count
    return f"{value}.reshape({(size, per_op) + shape[1:]})[{_index(rows, constant)}]" \
           f".reshape({(count * per_op,) + shape[1:]})", count * per_op


def in_op_order_code(parts: list, trailing: tuple, concatenate: str, constant) -> str:
    """``parts`` (``(op places, expression, its rows)``, every op's value ``trailing`` past
    axis 0) concatenated, rows in op order, as ``_in_op_order`` joins them: one
    concatenation (``concatenate``, a name), and one fancy index where the parts interleave;
    ``Unwritable`` where the ops' rows differ in number (it reads them op by op)."""
    parts = sorted(parts, key=_first_place)
    places = [p for ps, _, _ in parts for p in ps]
    n = len(places)
    whole = parts[0][1] if len(parts) == 1 else \
        f"{concatenate}([{', '.join(value for _, value, _ in parts)}])"
    if places == list(range(n)):
        return whole
    total = sum(rows for _, _, rows in parts)
    per_op = total // n
    if per_op * n != total or any(rows != len(ps) * per_op for ps, _, rows in parts):
        raise Unwritable
    where = [0] * n     # (op place -> its place in ``whole``)
    for at, p in enumerate(places):
        where[p] = at
    if per_op == 1:
        return f"{whole}[{_index(where, constant)}]"
    return f"{whole}.reshape({(n, per_op) + trailing})[{_index(where, constant)}]" \
           f".reshape({(total,) + trailing})"


def _index(rows: list, constant) -> str:
    """The name of ``rows`` as an index array (what a list of them indexes as)."""
    return constant(np.array(rows, dtype=np.intp))


def _first_place(part) -> int:
    return part[0][0]
