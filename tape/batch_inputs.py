"""Gathering the inputs of a batch of lazy ops (``tape.batching``): each op's argument,
concatenated along axis 0, where runs of successive ops reading rows of one earlier batch's
output take them from that output at once (whole, a slice or one fancy index); and, on the
way, where those rows came from, for batched backward (``Unit.sources``, ``tape.units``);
a graph run again by the same batches follows the rows' recipe its first run recorded
(``gathered_again``). And where each op's rows start in a batch's outputs (``row_offsets``).
"""
from __future__ import annotations

import operator

from .pending import ShapeOnly, read, row_index
from .units import in_order_positions


def gathered(ops: list, slot: str, concatenate, index: int = -1, sources=None, recipe=None):
    """Argument ``slot`` (its entry ``index`` if it is a list) of every op of the batch
    ``ops``, concatenated along axis 0 in op order (None if one of them is None).

    The ops reading one output of one earlier batch take their rows from that batch's whole
    output at once, however they interleave with ops reading other batches (the children of
    a batch of tree nodes come from leaves and nodes of several depths, in turn): the output
    itself (all its rows in order), a slice, or one fancy index per earlier batch, then one
    concatenation, and where the ops' order differs from the batches' one fancy index that
    puts the rows back in op order. ``sources``, a list, gets the argument's ``Unit.sources``
    pieces on the way: ``(unit, output slot index, index, [rows], [op places])`` per earlier
    batch output (its ops share one unit; None where it has none, ``tape.units``), ``(None,
    op place)`` per array given to an op. ``recipe``, an empty list, gets where the rows
    came from, for ``gathered_again`` on the same graph: ``[(rows, op places, whole)]`` per
    earlier batch output (``whole``: the rows are all of it, in order, ``_is_whole``), then
    the places of the ops read one by one (nothing where None is returned)."""
    groups = []     # per earlier batch output read: [results, k, j, batch, rows, places, op]
    singles = []    # [([op place], value, source piece)]: values read one by one
    # the group the last op read, as locals: most ops read what the op before them read
    whole = last_k = last_j = rows = places = None
    for place, a in enumerate(_arguments(ops, slot, index)):
        if type(a) is tuple:
            d = a[0]
            if d.results is whole and a[1] == last_k and a[2] == last_j:
                rows.append(d.row)
                places.append(place)
                continue
            batch = d.batch
            k = a[1]
            if batch is not None and k not in batch[1]:
                whole, last_k, last_j = d.results, k, a[2]
                for group in groups:
                    if group[0] is whole and group[1] == k and group[2] == last_j:
                        rows, places = group[4], group[5]
                        rows.append(d.row)
                        places.append(place)
                        break
                else:
                    rows, places = [d.row], [place]
                    groups.append([whole, k, last_j, batch, rows, places, d])
                continue
            value = read(a)
            if value is None:       # (a part a batch summed into another op's part)
                return None
            singles.append(([place], value, _source(d, k, a[2], None, place)
                            if sources is not None else None))
        else:
            singles.append(([place], a, (None, place)))
    if sources is not None:
        for _, k, j, _, rows, places, d in groups:
            sources.append(_source(d, k, j, rows, places))
        sources.extend(piece for _, _, piece in singles)
    if recipe is not None:
        recipe += [[(rows[:], places[:], _is_whole(batch, rows))
                    for _, _, _, batch, rows, places, _ in groups],
                   [places[0] for places, _, _ in singles]]
    if not singles and len(groups) == 1:    # (rows in op order)
        results, k, j, batch, rows, _, _ = groups[0]
        return _rows_of(results, k, j, batch, rows)
    parts = [(places, _rows_of(results, k, j, batch, rows))
             for results, k, j, batch, rows, places, _ in groups]
    parts += [(places, value) for places, value, _ in singles]
    return _in_op_order(parts, ops, slot, concatenate, index)


def gathered_again(recipe: list, ops: list, slot: str, concatenate, index: int = -1,
                   sources=None):
    """``gathered`` for a batch of the graph whose ``recipe`` an earlier call recorded (the
    same ops reading the same rows of the same batches): the same parts, taken without
    finding them op by op. The recipe's lists become ``Unit.sources`` pieces' lists, which
    nothing changes."""
    groups, singles = recipe
    if not singles and len(groups) == 1:    # (rows of one earlier batch: most inputs)
        rows, places, whole = groups[0]
        a = ops[places[0]].args[slot]
        d, k, j = a if index < 0 else a[index]
        if sources is not None:
            sources.append(_source(d, k, j, rows, places))
        if whole:
            return d.results[k] if j < 0 else d.results[k][j]
        return _rows_of(d.results, k, j, d.batch, rows)
    if not groups and len(singles) == len(ops):     # (each op read alone, in op order)
        values = _arguments(ops, slot, index)
        if tuple not in map(type, values):  # (each given an array: as they are)
            if sources is not None:
                sources += [(None, place) for place in singles]
            return concatenate(values)
    parts, pieces = [], []
    for rows, places, _ in groups:
        op = ops[places[0]]
        d, k, j = op.args[slot] if index < 0 else op.args[slot][index]
        parts.append((places, _rows_of(d.results, k, j, d.batch, rows)))
        if sources is not None:
            pieces.append(_source(d, k, j, rows, places))
    for place in singles:
        a = ops[place].args[slot] if index < 0 else ops[place].args[slot][index]
        if type(a) is tuple:
            value = read(a)
            if value is None:       # (a part a batch summed into another op's part)
                return None
            if sources is not None:
                pieces.append(_source(a[0], a[1], a[2], None, place))
        else:
            value = a
            if sources is not None:
                pieces.append((None, place))
        parts.append(([place], value))
    if sources is not None:
        sources += pieces
    return _in_op_order(parts, ops, slot, concatenate, index)


def _arguments(ops: list, slot: str, index: int) -> list:
    """Argument ``slot`` (its entry ``index`` if it is a list) of each of ``ops``."""
    return [op.args[slot] for op in ops] if index < 0 else [op.args[slot][index] for op in ops]


def _source(d, k: int, j: int, rows, places):
    """A ``Unit.sources`` piece: rows ``rows`` (by default ``d``'s row) of output ``k``
    (index ``j``) of ``d``'s unit, read by the ops at ``places``; None if ``d`` ran without
    a unit."""
    unit = d.unit
    unit = unit() if unit is not None else None
    if unit is None:
        return None
    return (unit, k, j, [d.row], [places]) if rows is None else (unit, k, j, rows, places)


def _in_op_order(parts: list, ops: list, slot: str, concatenate, index: int):
    """The values of ``parts`` (``(op places, their rows)``) concatenated, rows in op order:
    one concatenation, and one fancy index where the parts interleave (each op with as many
    rows; else op by op)."""
    if len(parts) > 1:
        parts.sort(key=_first_place)
    places = parts[0][0] if len(parts) == 1 else [p for ps, _ in parts for p in ps]
    n = len(places)
    whole = parts[0][1] if len(parts) == 1 else concatenate([value for _, value in parts])
    if places == in_order_of(n):
        return whole
    rows = whole.shape[0]
    per_op = rows // n
    if per_op * n != rows or any(value.shape[0] != len(ps) * per_op for ps, value in parts):
        return _gathered_reads(ops, slot, concatenate, index)
    where = [0] * n     # (op place -> its place in ``whole``)
    for at, p in enumerate(places):
        where[p] = at
    if per_op == 1:
        return whole[where]
    shape = whole.shape
    return whole.reshape((n, per_op) + shape[1:])[where].reshape(shape)


def _first_place(part) -> int:
    return part[0][0]


class BatchRecipes(dict):
    """What one batch of a graph run again by the same batches (``batching.run_turns``)
    keeps across runs: ``{(input slot, index): recipe}`` (``column``), and what its first
    run found that every later one shares: ``pick``, its ops out of the walker's list (a
    tuple of them), ``offsets``, where each op's rows start (``row_offsets``), and
    ``positions``, their places on their tape where they are in order on one
    (``units.in_order_positions``; the walker checks every op's place); ``filings``, where
    its inputs' gradients go (``Unit.filings``), which the schedule keeps."""

    __slots__ = ("pick", "offsets", "positions", "filings")

    def __init__(self, turn: tuple, ops, filings: dict):
        super().__init__()
        self.pick = operator.itemgetter(*turn)
        self.offsets = row_offsets(ops)
        self.positions = in_order_positions(ops)
        self.filings = filings


def column(ops: list, slot: str, concatenate, index: int, sources=None, recipes=None):
    """``gathered``, or where a part is None, the other parts concatenated. ``recipes``, a
    dict kept across runs of one graph's batch: its recipe for this input (``gathered``)
    recorded on the first run, followed on later ones (``gathered_again``)."""
    recipe = None if recipes is None else recipes.get((slot, index))
    if recipe:
        value = gathered_again(recipe, ops, slot, concatenate, index, sources)
    else:
        if recipe is None and recipes is not None:
            recipe = recipes[(slot, index)] = []
        value = gathered(ops, slot, concatenate, index, sources, recipe)
    return value if value is not None else _gathered_reads(ops, slot, concatenate, index)


def _gathered_reads(ops: list, slot: str, concatenate, index: int):
    values = (read(a) if type(a) is tuple else a.array() if type(a) is ShapeOnly else a
              for a in _arguments(ops, slot, index))
    return concatenate([v for v in values if v is not None])


_in_order: dict = {}


def in_order_of(size: int) -> list:
    """``[0, 1, ..., size - 1]``, made once per size."""
    in_order = _in_order.get(size)
    if in_order is None:
        if len(_in_order) >= 256:
            _in_order.clear()
        in_order = _in_order[size] = list(range(size))
    return in_order


def _is_whole(batch: tuple, rows: list) -> bool:
    """Whether ``rows`` of a batch's output (``batch`` as for ``_rows_of``) are all of its
    rows, in order, along axis 0 (not stacked): ``_rows_of`` gives the output itself."""
    size = batch[0]
    return not batch[3] and len(rows) == size and rows == in_order_of(size)


def _rows_of(whole: tuple, k: int, j: int, batch: tuple, rows: list):
    """Rows ``rows`` (op places in ``batch``, ``(size, sums, offsets, stacked)`` of
    ``LazyOp.batch``) of a batch's output ``k`` (index ``j`` of it if it is a list), in that
    order, concatenated along axis 0."""
    value = whole[k] if j < 0 else whole[k][j]
    size, _, offsets, stacked = batch
    in_order = in_order_of(size)
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


def row_offsets(ops: list):
    """Where each op's rows start in a batch's outputs (and where the last ends), or None when
    every op has the same plan and so the same number of rows: ops whose inputs differ only in
    the batch axis batch together (``batch_rules.rule_of``'s key)."""
    plan = ops[0].plan
    for op in ops:
        if op.plan is not plan:
            break
    else:
        return None
    offsets = [0]
    total = 0
    for op in ops:
        total += rows_per_op(op.plan)
        offsets.append(total)
    return offsets


_rows: dict = {}


def rows_per_op(plan) -> int:
    """The batch-axis size of ``plan``'s outputs (every output of a batched op has its
    concatenated inputs' rows)."""
    rows = _rows.get(plan)
    if rows is None:
        if len(_rows) >= 4096:
            _rows.clear()
        rows = _rows[plan] = next(spec[0][0][0] for _, _, spec, _ in plan.outputs
                                  if spec and spec[0][0])
    return rows
