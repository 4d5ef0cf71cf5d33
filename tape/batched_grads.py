"""Where the batched backward's gradients go (``tape.batched_backward``): an input gradient
filed into the rows of the units that produced them, a run of rows at a time, or by variable
for a value no unit of this execution produced (a leaf, an earlier execution's value)."""
from __future__ import annotations

import numpy as np

from . import dtypes
from .batch_inputs import in_order_of
from .handles import entry_layout
from .pending import row_index
from .variable import Variable


def output_index(plan, slot: str) -> int:
    for k, (name, _, _, _) in enumerate(plan.outputs):
        if name == slot:
            return k
    raise KeyError(slot)


def handle_entry(h, which: int, slot: str, i: int):
    """Handle ``h``'s entry for its input (``which`` 0) or output (1) ``slot[i]``, read where
    the EagerHandle a lazy runner records keeps it: its ``inputs`` and ``outputs`` views, made
    on first read, cost a dict and a list per slot per handle (LM 16 sequences traced: ~550
    handles a step)."""
    return h.entries[entry_position(h.plan, which, slot, i)]


def entry_position(plan, which: int, slot: str, i: int) -> int:
    """Where an EagerHandle of ``plan`` keeps its entry for input (``which`` 0) or output (1)
    ``slot[i]`` (the inputs' entries first, ``handles.entry_layout``; found once per plan
    and entry: batched backward files a shared input's gradient by it, per unit)."""
    key = (plan, which, slot, i)
    position = _positions.get(key)
    if position is None:
        layout = entry_layout(plan)
        at = 0 if which == 0 else sum(count for _, count in layout[0])
        for name, count in layout[which]:
            if name == slot:
                break
            at += count
        else:
            raise KeyError(slot)
        if len(_positions) >= 16384:
            _positions.clear()
        position = _positions[key] = at + i
    return position


_positions: dict = {}


def total_rows(unit, rows_per_op: int) -> int:
    offsets = unit.offsets
    return rows_per_op * unit.size if offsets is None else offsets[-1]


def whole_spec(unit, k: int, j: int) -> tuple:
    """(shape, dtype) of the unit's whole output ``k`` (index ``j``): every op's rows."""
    shape, dtype = unit.plan.outputs[k][2][max(j, 0)]
    if unit.size > 1 and not unit.stacked:      # (a stacked plan's specs are whole)
        shape = (total_rows(unit, shape[0]),) + tuple(shape[1:])
    return shape, dtype


def file_gradient(unit, key: tuple, g, leaves: dict, leaf_grads: dict, other: dict,
                  kept: dict | None = None) -> None:
    """File input gradient ``g`` of the unit's input ``key`` (``(slot, index)``: whole-batch
    rows, or the summed gradient of a shared input) piece by piece. ``kept``, where a
    schedule keeps one per unit (``unit_schedule.HandleLayout``), takes what its first run
    found for a gradient of one piece (its ``placement``, or a shared variable's entry
    position), followed from then on; routes of several pieces go to ``Unit.filings``."""
    pieces = unit.sources[key]
    # One piece: rows of one unit's output, or the array given to a unit's one op or shared
    # by all its ops (else an array given to each op of a batch is a piece of its own)
    if len(pieces) == 1:
        found = None if kept is None else kept.get(key)
        piece = pieces[0]
        target = piece[0]
        if target is not None:
            if found is None:
                found = placement(target, piece[1], piece[2], piece[3], unit.stacked)
                if kept is not None:
                    found = kept[key] = _kept(found)
            add_placed(target, piece[1], piece[2], found, g)
        else:   # (the variable every op shares, ``_applies`` checked: any handle's entry)
            h = unit.handles[0]
            if h is None:
                h = next(h for h in unit.handles if h is not None)
            if found is None:
                found = entry_position(h.plan, 0, *key)
                if kept is not None:
                    kept[key] = found
            _file_by_variable(h.entries[found], g, leaves, leaf_grads, other)
        return
    filings = unit.filings
    route = None if filings is None else filings.get(key)
    if route is None:
        route = _route(unit, pieces, g)
        if filings is not None:
            filings[key] = route
    targets, singles = route
    handles, reached = unit.handles, unit.reached
    fslot, i = key
    for row, rows in singles:
        h = handles[row]    # (None: an op of the batch another tape recorded)
        if row in reached and h is not None:
            _file_by_variable(handle_entry(h, 0, fslot, i), g[rows], leaves, leaf_grads, other)
    for at, place, part in targets:
        piece = pieces[at]
        add_placed(piece[0], piece[1], piece[2], place, g[part])


def _route(unit, pieces: list, g) -> tuple:
    """Where the rows of ``g``, a gradient of a unit's input read in ``pieces`` of two or
    more (``Unit.sources``), go: ``(targets, singles)``, ``targets`` ``(the place in
    ``pieces`` of the first piece of a unit's output, how its rows take their part
    (``placement``), the part of g)`` per output of an earlier unit, ``singles`` ``(op
    place, its part of g)`` per array given to one op. The same for every run of one
    graph's batch (``Unit.filings``): the units the pieces name are the same batches.

    The pieces that go to one output of one unit are added as one: a batch of tree nodes
    reads its children from a few units (forest: ~340 outputs a step); their rows are
    joined, and their parts of ``g`` (their op places) taken with one slice or index."""
    size = unit.size
    offsets = unit.offsets
    if offsets is None:
        per_op = g.shape[0] // size
        offsets = range(0, per_op * (size + 1), per_op)
    targets = {}    # (unit, output slot index, index) -> [first piece, rows, op places]
    singles = []
    for at, piece in enumerate(pieces):
        source = piece[0]
        if source is not None:
            key = (source, piece[1], piece[2])
            target = targets.get(key)
            if target is None:
                targets[key] = [at, piece[3], piece[4]]
            else:   # (new lists: the pieces' own are the unit's sources)
                target[1] = target[1] + piece[3]
                target[2] = target[2] + piece[4]
        else:
            row = piece[1]
            singles.append((row, slice(offsets[row], offsets[row + 1])))
    in_order = in_order_of(size)
    route = []
    for at, rows, places in targets.values():
        first, count = places[0], len(places)
        if places == in_order[first:first + count]:
            part = slice(offsets[first], offsets[first + count])
        elif unit.offsets is not None:
            part = row_index(offsets, places)
        else:   # (as many rows per op: no range per op, which cost forest 4% a step)
            part = np.array(places) * per_op
            if per_op > 1:
                part = (part[:, None] + np.arange(per_op)).ravel()
        piece = pieces[at]
        place = placement(piece[0], piece[1], piece[2], rows, unit.stacked)
        route.append((at, place if unit.filings is None else _kept(place), part))
    return route, singles


def _file_by_variable(e, g, leaves: dict, leaf_grads: dict, other: dict) -> None:
    """Add ``g`` to the gradient of handle entry ``e``: a leaf's, or a value's that an earlier
    execution computed (its unit takes it, ``take_filed``)."""
    d = e.desc if type(e) is Variable else e
    if g.shape != d.shape:      # (a block of a stacked batch's gradient)
        g = g.reshape(d.shape)
    if type(e) is Variable and e._tape == 0:
        leaves[d] = e
        _add(leaf_grads, d, g)
    else:
        _add(other, d, g)


def _add(table: dict, key, g) -> None:
    """Add part ``g`` to ``table[key]`` (``[array, owned]``): the first part is kept as it is
    (a kernel's output may be shared, so it is never written), the second makes a new sum,
    which takes any further parts in place."""
    entry = table.get(key)
    if entry is None:
        table[key] = [g, False]
    elif entry[1]:
        total = entry[0]
        total += g
        entry[0] = total    # (a 0-d sum is a numpy scalar: += made a new one)
    else:
        entry[0] = entry[0] + g
        entry[1] = True


def add_rows(unit, k: int, j: int, rows: list, g, reshape: bool = False) -> None:
    """Add ``g``, the gradient of rows ``rows`` (op places, in order, maybe repeated) of the
    unit's output ``k`` (index ``j``) concatenated (``reshape``: or stacked, as a stacked
    batch's input gradient is), to the unit's gradient of that output."""
    add_placed(unit, k, j, placement(unit, k, j, rows, reshape), g)


# How a placement adds its gradient (``placement``): as the whole output's (the first part
# kept, ``_add``), summed over its blocks first, into the rows at an index of the whole
# gradient (by ``np.add.at`` where rows repeat), into a run of ops' rows where every op has
# as many, or into the blocks at an index where the gradient is one block per op.
WHOLE, SUMMED, AT, ADD_AT, OP_RUN, BLOCKS, BLOCKS_ADD_AT = range(7)


def placement(unit, k: int, j: int, rows: list, reshape: bool = False) -> tuple:
    """How ``add_rows`` adds a gradient of rows ``rows`` of the unit's output ``k`` (index
    ``j``): ``(rows, how, index, shape)``, ``how`` one of ``WHOLE``... (above) and
    ``shape`` what the gradient is made first: the whole output's shape (``WHOLE``,
    ``SUMMED``; None: as it is), one block per row (``BLOCKS``...), or for ``AT`` and
    ``ADD_AT`` whether it is made rows of the whole. Fixed by the unit's batch and
    ``rows``: a schedule keeps it (``file_gradient``, ``_route``), index arrays made once
    and ``rows`` made a frozenset (``_kept``)."""
    size = unit.size
    count = len(rows)
    if size == 1:
        if count > 1:   # (one value read by several ops of a batch: their parts, summed)
            return rows, SUMMED, (count, -1), whole_spec(unit, k, j)[0]
        return rows, WHOLE, None, whole_spec(unit, k, j)[0] if reshape else None
    in_order = in_order_of(size)
    if count == size and rows == in_order:
        return rows, WHOLE, None, \
            whole_spec(unit, k, j)[0] if reshape or unit.stacked else None
    first = rows[0]
    offsets = unit.offsets
    run = rows == in_order[first:first + count]
    if offsets is not None:     # (blocks of ops whose rows differ in number: as rows)
        if run:
            return rows, AT, slice(offsets[first], offsets[first + count]), reshape
        how = AT if len(set(rows)) == count else ADD_AT
        return rows, how, row_index(offsets, rows), reshape
    if run and not (reshape or unit.stacked):   # (``g``: the run's rows, as the whole's)
        return rows, OP_RUN, (first, count), None
    if run:     # (op ``i``'s rows: block ``i``)
        return rows, BLOCKS, slice(first, first + count), (count, -1)
    how = BLOCKS if len(set(rows)) == count else BLOCKS_ADD_AT
    return rows, how, np.array(rows, np.intp), (count, -1)


def _kept(place: tuple) -> tuple:
    """``place`` as a schedule keeps it: its rows a frozenset, which a unit's ``reached``
    set takes in half the time of a list (16 rows: 0.31 against 0.64 us)."""
    return (frozenset(place[0]),) + place[1:]


def add_placed(unit, k: int, j: int, place: tuple, g) -> None:
    """``add_rows`` of a gradient ``g`` of the rows ``placement`` found ``place`` for."""
    rows, how, index, shape = place
    grads = unit.grads
    if grads is None:
        grads = unit.grads = {}
        unit.reached = set(rows)
    else:
        unit.reached.update(rows)
    key = (k, j)
    if how <= SUMMED:
        if how == SUMMED:
            g = g.reshape(index).sum(axis=0)
        if shape is not None:
            g = g.reshape(shape)
        _add(grads, key, g)
        return
    entry = grads.get(key)
    if entry is None or not entry[1]:
        whole, dtype = whole_spec(unit, k, j)
        total = unit.plan.place.array_module().zeros(whole, dtypes.to_numpy(dtype)) \
            if entry is None else entry[0].copy()
        entry = grads[key] = [total, True]
    total = entry[0]
    if how <= ADD_AT:
        if shape:
            g = g.reshape((-1,) + total.shape[1:])
        if how == AT:
            total[index] += g
        else:
            np.add.at(total, index, g)
    elif how == OP_RUN:
        first, count = index
        per_op = total.shape[0] // unit.size
        total[first * per_op:(first + count) * per_op] += g
    else:
        blocks = total.reshape((unit.size, -1))
        g = g.reshape(shape)
        if how == BLOCKS:
            blocks[index] += g
        else:
            np.add.at(blocks, index, g)


def take_filed(unit, other: dict) -> None:
    """Gradients filed by variable (``_file_by_variable``) for the outputs of ``unit``'s ops:
    added into the unit's rows."""
    for row, h in enumerate(unit.handles):
        if h is None:
            continue
        for slot, entries in h.outputs.items():
            for j, e in enumerate(entries):
                d = e.desc if type(e) is Variable else e
                entry = other.pop(d, None)
                if entry is not None:
                    k = output_index(unit.plan, slot)
                    if unit.grads is None:
                        unit.grads = {}
                        unit.reached = set()
                    add_rows(unit, k, j if unit.plan.outputs[k][1] else -1, [row], entry[0])
