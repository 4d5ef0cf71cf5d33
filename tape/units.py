"""Units: the kernel calls of a lazy execution, as batched backward (``tape.batched_backward``)
sees them.

When ``tape.batching`` runs ops (a batch, a lone op, the ops of fused chains), it notes each call
here as a *Unit*: the ops it ran (rows), the arrays it was given, its whole results, and, for
every input that wants a gradient, where its rows came from. Each op gets a weak reference to
its unit and its row, and its tape's list of lazy records (``Tape.deferred``) gets the unit
(or ``(unit, row)``, ``_place``) in the op's place: the tape alone holds its units, so a
Variable the user keeps after the tape is gone holds only its own value.
"""
from __future__ import annotations

import functools
import itertools
import weakref

from .batch_rules import SHARED
from .pending import LazyOp

_stamps = itertools.count()


class Unit:
    """One kernel call of a lazy execution, as backward sees it.

    ``size`` ops of one ``plan`` ran in it (an op's ``unit`` and ``row`` say which and where;
    ``offsets``, where each op's rows start, when the ops' plans differ in the batch axis;
    ``stacked``: the ops' inputs and outputs are blocks along a new axis 0, and ``plan`` the
    batch rule's ``stacked_plan``);
    ``ins`` is the batch rule's ``{input slot: CAT or SHARED}`` (None: every input is
    concatenated, as a unit of one op or a fused chain's); ``arrays`` the kernel's inputs and
    ``results`` its outputs (None for the ops of fused chains, whose values backward reads
    through their handles); ``sources`` ``{(input slot, index): pieces}`` for the inputs that
    want a gradient, each piece ``(unit, output slot index, index or -1, [rows], [op places])``
    for ops reading rows of an earlier unit's output (rows ``rows`` in the order of the ops
    at ``places``), or ``(None, row)`` for an array given to op ``row``; ``stamp`` its place
    in execution order; ``filings``, where a gradient of each input read in several pieces
    goes (``batched_grads._route``), kept across runs of one graph's batch (None: found per
    run). Backward fills ``handles`` (per row), ``grads`` (``{(output slot
    index, index): [array, owned]}``, whole-batch gradients) and ``reached`` (the rows some
    gradient reached), and clears them all as it is done."""

    __slots__ = ("plan", "size", "offsets", "stacked", "ins", "arrays", "results", "sources",
                 "filings", "stamp", "handles", "grads", "reached", "__weakref__")

    def __init__(self, plan, size: int, ins, arrays, results, offsets=None, stacked=False):
        self.plan = plan
        self.size = size
        self.offsets = offsets
        self.stacked = stacked
        self.ins = ins
        self.arrays = arrays
        self.results = results
        self.sources = self.filings = None
        self.stamp = next(_stamps)
        self.handles = self.grads = self.reached = None


def note_unit(ops: list, ins, arrays, results, offsets=None, stacked_plan=None,
              batch=None, gathered=None, filings=None, positions=None) -> bool:
    """Make the Unit of ``ops`` (row order), which ran as one call on ``arrays`` (of
    ``stacked_plan``, if not their own), and give each op its unit and row; only where a
    gradient may flow back (the plan wants one). With ``batch`` (``LazyOp.batch``), each op
    is also handed the batch's ``results`` in the same pass (as ``batching._hand_out`` does;
    its inputs it drops when the execution ends, ``batching.run_ops``): True if it was.
    ``gathered``: the sources of some inputs,
    found as the batch gathered them (``batch_inputs.gathered``; a None piece: no unit);
    ``filings``: the unit's ``filings``, where a schedule keeps them; ``positions``: the
    ops' places on their tape, where a schedule knows them (``_place``)."""
    first = ops[0]
    plan = first.plan
    if not plan.requires_grad or type(first) is not LazyOp:     # (grad ops: none)
        return False
    if not recorded(ops):
        return False
    unit = Unit(stacked_plan or plan, len(ops), ins, arrays, results, offsets,
                stacked_plan is not None)
    unit.sources = _sources(ops, plan, ins, gathered)
    unit.filings = filings
    if batch is None:
        _place(ops, unit)
        return False
    if positions is None:
        _place(ops, unit, results, batch)
    else:
        _place_in_order(ops, unit, results, batch, positions)
    return True


def recorded(ops: list) -> bool:
    """Whether a tape may still go by units through one of ``ops``: one has a record its
    tape's backward has not dropped (``Tape.deferred``; a backward that goes op by op drops
    them before it runs anything, so the forward ops it runs make no units)."""
    for op in ops:
        record = op.record
        if record is not None and record[1] < len(record[0]):
            return True
    return False


def _place(ops: list, unit, results=None, batch=None) -> None:
    """Give each of ``ops`` its unit (weakly: a unit lives as long as its tape, which holds
    it, or a later unit reading it; a Variable the user keeps holds its op, and must not keep
    what only backward needed) and row, and file them where its tape's backward finds them;
    with ``batch``, hand it the batch's ``results`` too (``note_unit``).

    A tape's records get the unit itself when its rows ``0, 1, ...`` follow each other on
    that tape in order (a batch's ops are in record order): its backward appends their
    handles in turn. Else (an op recorded on no tape or on another tape, out of order, or
    whose tape's backward has run) every record of the unit gets ``(unit, row)``. So the
    common case makes no tuple per op and backward no row lookup per handle."""
    ref = weakref.ref(unit)
    first = None    # the records list of row 0, while every row so far is on it in order
    row = start = last = 0
    for op in ops:
        if batch is not None:
            op.results = results
            op.batch = batch
        op.unit = ref
        op.row = row
        record = op.record
        if record is not None:
            op.record = None    # (a Variable holding the op must not hold its tape's units)
            records, index = record
            if records is first and index > last:
                records[index] = unit
                last = index
                row += 1
                continue
            if index < len(records):    # (else its tape's backward has run: none wants it)
                if row == 0:
                    first = records
                    records[index] = unit
                    start = last = index
                    row += 1
                    continue
                records[index] = (unit, row)
        if first:
            _as_rows(first, start, last, unit)
        first = False
        row += 1


def _place_in_order(ops: list, unit, results, batch, positions: list) -> None:
    """``_place`` for ops a schedule ran before (``batch_inputs.BatchRecipes``): recorded on
    one tape at ``positions``, in order, its backward not run yet (the walker checked it), so
    their records get the unit itself, filed in one pass."""
    records = ops[0].record[0]
    ref = weakref.ref(unit)
    for row, op in enumerate(ops):
        op.unit = ref
        op.row = row
        op.record = None
        op.results = results
        op.batch = batch
    for index in positions:
        records[index] = unit


def in_order_positions(ops: list):
    """The record positions of ``ops``, if they are on one tape in order (``_place`` files
    the unit itself there), else None."""
    record = ops[0].record
    if record is None:
        return None
    records, last = record
    positions = [last]
    for op in ops[1:]:
        record = op.record
        if record is None or record[0] is not records or record[1] <= last:
            return None
        last = record[1]
        positions.append(last)
    return positions if last < len(records) else None


def _as_rows(records: list, start: int, last: int, unit) -> None:
    """Records ``start..last`` that hold ``unit`` itself (its rows ``0, 1, ...``, in turn)
    as ``(unit, row)``."""
    row = 0
    for index in range(start, last + 1):
        if records[index] is unit:
            records[index] = (unit, row)
            row += 1


def note_fused(groups: list) -> None:
    """Units for the forward ops of FusedGroups of one kind about to run as one loop: one per
    member place and plan, in member order (an intermediate value the group keeps in registers
    is never stored; nothing reads it)."""
    for position in range(len(groups[0].members)):
        by_plan = {}
        for group in groups:
            op = group.members[position]
            if type(op) is LazyOp:      # (a grad op or an Accumulation: no unit)
                by_plan.setdefault(op.plan, []).append(op)
        for plan, ops in by_plan.items():
            if plan.requires_grad and recorded(ops):
                unit = Unit(plan, len(ops), None, None, None)
                unit.sources = _sources(ops, plan, None)
                _place(ops, unit)


def _sources(ops: list, plan, ins, gathered=None):
    """``Unit.sources`` of ``ops`` (their ``args`` still hold refs), taking those ``gathered``
    has (``gathered`` itself where it has them all); None if an input that wants a gradient
    comes from an op that ran without a unit."""
    if gathered and gathered.keys() == _wanted_inputs(plan):
        for pieces in gathered.values():
            if None in pieces:
                return None
        return gathered
    sources = {}
    args = ops[0].args
    for slot, wants in plan.wants_grad.items():
        # (per slot, not per input: a lone concat of a sequence's 30 steps takes a list)
        listed = type(args[slot]) is list
        chosen = ops[:1] if ins is not None and ins.get(slot) == SHARED else ops
        for i, wanted in enumerate(wants):
            if not wanted:
                continue
            if gathered:
                pieces = gathered.get((slot, i))
                if pieces is not None:
                    if None in pieces:
                        return None
                    sources[(slot, i)] = pieces
                    continue
            pieces = []
            last = None
            for row, op in enumerate(chosen):
                a = op.args[slot][i] if listed else op.args[slot]
                if type(a) is tuple:
                    d, k, j = a
                    unit = d.unit
                    unit = unit() if unit is not None else None
                    if unit is None:
                        return None
                    if last is not None and last[0] is unit and last[1] == k and last[2] == j:
                        last[3].append(d.row)
                        last[4].append(row)
                    else:
                        last = (unit, k, j, [d.row], [row])
                        pieces.append(last)
                else:
                    last = None
                    pieces.append((None, row))
            sources[(slot, i)] = pieces
    return sources


@functools.lru_cache(maxsize=4096)
def _wanted_inputs(plan) -> frozenset:
    """``(input slot, index)`` of each input of ``plan`` that wants a gradient."""
    return frozenset((slot, i) for slot, wants in plan.wants_grad.items()
                     for i, want in enumerate(wants) if want)
