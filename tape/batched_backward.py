"""Backward of a lazy tape at the level of the forward batches: one grad call per batch.

When a lazy tape's forward ops ran batched (``tape.batching``), each kernel call is a *Unit*
(``tape.units``):
the ops it ran (rows ``0..size-1``), the arrays it was given (a batch's inputs concatenated
along axis 0, shared ones once), its whole results, and, per input that wants a gradient,
where its rows came from (*sources*: runs of rows of an earlier unit's output, or an array
given to one op). Backward then walks the units in reverse order of execution and runs each
prepared grad step of the unit's plan once, on the unit's arrays and its output gradients,
which are whole-batch arrays too: the gradient of a batch of ``n`` ops is one call over the
batch's rows, and the gradient of an input the batch shares is summed by that call, as a
batch rule (``tape.batch_rules``) promises. The rows of an input gradient are added into the
gradient arrays of the units that produced them, a run of rows at a time; an array given to
one op (a leaf, a value computed before the op was recorded) gets its rows by the op's handle,
as eager backward files a gradient by VarDesc.

So backward costs per batch, not per op: no grad op is deferred, scheduled or re-batched, and
no gradient is gathered from rows scattered over other batches. Gradients equal eager ones
within float32 rounding: a batch's grad is one product over all rows where eager Tape makes
one per op, and a variable's gradient parts are added in the order backward reaches them.

Used for a tape whose every record is lazy and whose forward ops batch (``_SAMPLES``), with
batching on; anything else (one sample's graph, whose grad ops fuse with its forward ops when
deferred; an eager record on the tape; a grad step that reads an input's gradient; batching
off, which must stay bit for bit eager) goes through ``tape.lazy_backward``'s per-op deferral.
"""
from __future__ import annotations

from itertools import repeat

from . import dtypes
from .backward import set_grad
from .batch_rules import SHARED
from .batched_grads import (
    add_rows,
    entry_position,
    file_gradient,
    handle_entry,
    output_index,
    take_filed,
    total_rows,
    whole_spec,
)
from .grad_replay import _counts, prepare, shape_only
from .grad_steps import FWD_IN, FWD_OUT, META_IN, META_OUT, OPT_OUT_GRAD, OUT_GRAD, TEMP
from .pending import collector_paused, prune, read
from .variable import Variable


def run_batched_backward(handles: list, records: list, loss, turns: list | None = None,
                         checked: bool = False, layout=None) -> bool:
    """Backward of ``loss`` over a lazy tape's ``handles`` and, in the same order, where their
    ops ran (``records``: its unit, or ``(unit, row)``, ``units._place``; None for an op that
    did not run or wants no gradient): the loss computed (running the forward ops), then the
    grad steps unit by unit. False, having changed nothing but computing the loss, where it
    does not apply (where the forward does not batch, it also drops ``records``: the per-op
    path makes no units). ``turns``, a list, gets the forward's kernel calls, as
    ``_forward_batches`` gives them; ``checked``: every unit is known to apply (``_applies``
    answered so for this graph in this state: ``tape.unit_schedule``); ``layout``, a
    ``unit_schedule.HandleLayout``: which handles each unit takes, found by this call once
    and given out by it from then on."""
    from . import batching  # (whose ``invoke`` runs every kernel of a lazy execution)
    if not _forward_batches(loss, batching, turns):
        records.clear()     # (the per-op path needs no units of the forward ops it runs)
        return False
    units = []
    try:
        if layout is not None and layout.order is not None:
            seed = layout.units(handles, records, units)
        else:
            seed = _units(handles, records, loss, units, checked)
            if seed is None:
                return False
            if layout is not None:
                layout.record(handles, units, seed)
        records.clear()
        unit, k, j, row = seed
        d = loss.desc
        add_rows(unit, k, j, [row], loss.place.array_module().ones(d.shape,
                                                                    dtypes.to_numpy(d.dtype)))
        leaves, leaf_grads, other = {}, {}, {}
        invoke = batching.invoke
        kept = layout.kept if layout is not None and layout.order is not None else \
            repeat(None)
        for unit, filed in zip(units, kept):
            if other:
                take_filed(unit, other)
            if unit.grads is not None:
                _unit_backward(unit, leaves, leaf_grads, other, invoke, filed)
            _release(unit)
        units = ()
        # The handles go last, in reverse record order, as eager backward drops them: what
        # they hold was made in record order, and freeing it unit by unit (each unit's ops
        # spread over every sample's stretch of the tape) cost forest 40% more (5.4 against
        # 9.6 ms a step). The large values are the units' inputs, freed as each unit is done,
        # and the batches' results, which the tape's kept Variables hold until here either way.
        handles.clear()
    except BaseException:
        handles.clear()
        raise
    finally:
        for unit in units:  # (left by a return or an error: nothing may hold the handles)
            _release(unit)
    for d, leaf in leaves.items():
        set_grad(leaf, leaf_grads[d][0])
    return True


def _units(handles: list, records: list, loss, units: list, checked: bool):
    """Fill ``units`` with the units of ``records`` that ran ops of ``handles``, each given
    its handles (per row), in the order backward reaches them (reverse order of execution),
    and return where the loss's gradient starts (``_seed``); None where the batched backward
    does not apply (``checked``: every unit is known to)."""
    for h, entry in zip(handles, records):
        if entry is None:
            continue
        if type(entry) is tuple:
            unit, row = entry
            hs = unit.handles
            if hs is None:
                if unit.sources is None:
                    return None
                hs = unit.handles = [None] * unit.size
                units.append(unit)
            hs[row] = h
        else:   # (the unit itself: its rows in turn, ``units._place``)
            hs = entry.handles
            if hs is None:
                if entry.sources is None:
                    return None
                hs = entry.handles = []
                units.append(entry)
            hs.append(h)
    seed = _seed(handles, records, loss)
    if seed is None or len(units) * 2 > len(handles):
        return None     # (the latter: a loss computed before, by ops that did not batch)
    if not checked:
        for unit in units:
            if not _applies(unit):
                return None
    units.sort(key=_by_stamp, reverse=True)
    return seed


# How many of the ops ready first must share a signature for backward to go by units: the
# samples of a batch of them (16 trees' leaves, 16 sequences' first steps). One sample's graph
# may hold two or three alike (``c + 3.0`` written twice), too few for batching to pay back
# what the per-op path saves there: its grad ops, deferred, fuse with the forward ops they read
# into one loop (``tape.fusion``).
_SAMPLES = 4


def _forward_batches(loss, batching, turns: list | None = None) -> bool:
    """Compute the loss, if it is pending, when its forward ops batch: ``_SAMPLES`` of the ops
    ready first share a signature. False, having run nothing, otherwise. ``turns``, a list,
    gets the agenda's kernel calls (``batching.run_ops``), each op named by its record
    position (every op is on the tape: ``lazy_replay``'s walker checked it), for
    ``tape.unit_schedule``; none where fusion grouped ops."""
    ref = loss._lazy
    if ref is None or loss._value is not None:
        return True
    with collector_paused():
        needed = prune([ref[0]])
        counts = {}
        for op in needed:
            if not op.waiting and op.plan is not None:
                sig = batching.signature(op)
                if sig is not op:
                    count = counts.get(sig, 0) + 1
                    if count >= _SAMPLES:
                        break
                    counts[sig] = count
        else:
            for op in needed:   # (unmarked: the per-op path walks again)
                op.users = None
            return False
        positions = None if turns is None else [op.record[1] for op in needed]
        try:
            batching.run_ops(needed, turns)
        except BaseException:
            for op in needed:
                op.users = None
            raise
        if turns:
            turns[:] = [positions[turn] if type(turn) is int else
                        tuple(positions[i] for i in turn) for turn in turns]
    loss._value = read(ref)
    loss._lazy = None
    return True


def _by_stamp(unit) -> int:
    return unit.stamp


def _release(unit) -> None:
    unit.handles = unit.grads = unit.reached = unit.arrays = unit.sources = None
    unit.results = unit.filings = None


def _seed(handles: list, records: list, loss):
    """``(unit, output slot index, index, row)`` of the loss, from the last handle that
    produced it (the units' ``handles`` filled); None if no lazy op with a unit did."""
    d = loss.desc
    for h, entry in zip(reversed(handles), reversed(records)):
        for slot, entries in h.outputs.items():
            for j, e in enumerate(entries):
                if (e.desc if type(e) is Variable else e) is d:
                    if entry is None:
                        return None
                    if type(entry) is tuple:
                        unit, row = entry
                    else:
                        unit = entry
                        row = next(r for r, x in enumerate(unit.handles) if x is h)
                    k = output_index(unit.plan, slot)
                    return unit, k, j if unit.plan.outputs[k][1] else -1, row
    return None


_supported_plans: dict = {}
_BATCHABLE_READS = (FWD_IN, FWD_OUT, META_IN, META_OUT, OUT_GRAD, OPT_OUT_GRAD, TEMP)


def _applies(unit) -> bool:
    """Whether ``unit``'s backward can run as one: its plan's grad steps read only what a
    unit has (``_steps_supported``); a unit without its arrays (fused chains) has a handle
    for every op; an input the batch shares, given as an array, is one variable for every op
    (its one summed gradient goes to one place)."""
    hs = unit.handles
    if unit.arrays is None and None in hs:
        return False
    ins = unit.ins
    if not ins or unit.size == 1:
        return _steps_supported(unit)
    for (slot, i), pieces in unit.sources.items():
        if ins.get(slot) == SHARED and pieces[0][0] is None and not _one_variable(hs, slot, i):
            return False
    return _steps_supported(unit)


def _one_variable(hs: list, slot: str, i: int) -> bool:
    """Whether input ``slot[i]`` of every handle in ``hs`` (None: an op another tape
    recorded) is one variable (``handle_entry``, its place found once)."""
    first = position = None
    for h in hs:
        if h is None:
            continue
        if position is None:    # (a unit's handles share a signature: one layout)
            position = entry_position(h.plan, 0, slot, i)
        e = h.entries[position]
        e = e.desc if type(e) is Variable else e
        if first is None:
            first = e
        elif e is not first:
            return False
    return True


def _steps_supported(unit) -> bool:
    plan = unit.plan
    ok = _supported_plans.get(plan)
    if ok is None:
        h = next(h for h in unit.handles if h is not None)
        steps = plan.backward if plan.backward is not None else prepare(plan, _counts(h))
        ok = all(kind in _BATCHABLE_READS for p in steps for _, _, bound in p.ins
                 for kind, _, _ in bound)
        if len(_supported_plans) >= 4096:
            _supported_plans.clear()
        _supported_plans[plan] = ok
    return ok


def _unit_backward(unit, leaves: dict, leaf_grads: dict, other: dict, invoke,
                   kept: dict | None) -> None:
    """Run the grad steps of ``unit`` on its arrays and output gradients, and file each input
    gradient: rows into the units that produced them, or by variable (``kept``: as
    ``file_gradient`` keeps)."""
    hs = unit.handles
    h0 = hs[0] if hs[0] is not None else next(h for h in hs if h is not None)
    temps = {}
    for p, ins, outs in unit_program(unit.plan, h0):
        args = {}
        for slot, duplicable, bound in ins:
            if duplicable:
                values = [_argument(unit, h0, b, temps) for b in bound]
                args[slot] = [v for v in values if v is not None]
            else:
                args[slot] = _argument(unit, h0, bound[0], temps)
        result = invoke(p.plan, args, p.wants, None)
        for n, duplicable, targets in outs:
            out = result[n]
            if out is None:
                continue
            for j, kind, key in targets:
                g = out[j] if duplicable else out
                if g is None:
                    continue
                if kind == TEMP:
                    temps[key] = g
                else:
                    file_gradient(unit, key, g, leaves, leaf_grads, other, kept)


_programs: dict = {}


def unit_program(plan, h0) -> tuple:
    """Per grad step of ``plan``: ``(step, inputs, outputs)``, the bindings written for a
    unit: inputs ``(slot, duplicable, ((kind, fslot, i, output index, index), ...))`` and the
    wanted, kept outputs ``(n, duplicable, ((j, kind, key), ...))``, ``key`` the input
    ``(fslot, i)`` a gradient goes to, or the temporary ``fslot`` (made once per plan; ``h0``
    a handle of it)."""
    program = _programs.get(plan)
    if program is not None:
        return program
    steps = []
    for p in plan.backward if plan.backward is not None else prepare(plan, _counts(h0)):
        ins = []
        for slot, duplicable, bound in p.ins:
            if bound:
                ins.append((slot, duplicable, tuple(_resolved(plan, *b) for b in bound)))
        outs = []
        for n, (slot, duplicable, bound) in enumerate(p.outs):
            if slot in p.wants:
                targets = tuple((j, kind, fslot if kind == TEMP else (fslot, i))
                                for j, (kind, fslot, i, kept) in enumerate(bound) if kept)
                if targets:
                    outs.append((n, duplicable, targets))
        steps.append((p, tuple(ins), tuple(outs)))
    if len(_programs) >= 4096:
        _programs.clear()
    program = _programs[plan] = tuple(steps)
    return program


def _resolved(plan, kind: int, fslot: str, i: int) -> tuple:
    """A binding with the forward output it names as ``(output index, index or -1)``."""
    if kind in (OUT_GRAD, OPT_OUT_GRAD, FWD_OUT):
        k = output_index(plan, fslot)
        return kind, fslot, i, k, i if plan.outputs[k][1] else -1
    return kind, fslot, i, -1, -1


def _joined_entries(unit, h0, which: int, fslot: str, i: int):
    """Every handle's entry for input (``which`` 0) or output (1) ``fslot[i]``, joined as the
    unit's argument; the unit's handles share ``h0``'s plan, so the entry's place is found
    once."""
    position = entry_position(h0.plan, which, fslot, i)
    return joined(unit, [h.entries[position] for h in unit.handles])


def _argument(unit, h0, binding: tuple, temps: dict):
    """A grad step's input bound as ``(kind, fslot, i, k, j)`` (``_resolved``: forward output
    ``k``, index ``j``, where it names one), for the whole unit."""
    kind, fslot, i, k, j = binding
    if kind == OUT_GRAD or kind == OPT_OUT_GRAD:
        entry = unit.grads.get((k, j))
        if entry is not None:
            return entry[0]
        if kind == OPT_OUT_GRAD:
            return None
        shape, dtype = whole_spec(unit, k, j)
        return unit.plan.place.array_module().zeros(shape, dtypes.to_numpy(dtype))
    if kind == FWD_IN:
        arrays = unit.arrays
        if arrays is not None:
            a = arrays[fslot]
            return a[i] if type(a) is list else a
        return _joined_entries(unit, h0, 0, fslot, i)
    if kind == FWD_OUT:
        results = unit.results
        if results is not None:
            a = results[k]
            return a if j < 0 else a[j]
        return _joined_entries(unit, h0, 1, fslot, i)
    if kind == TEMP:
        return temps[fslot]
    e = handle_entry(h0, 1 if kind == META_OUT else 0, fslot, i)
    d = e.desc if type(e) is Variable else e
    shape = d.shape
    if unit.size > 1 and not (kind == META_IN and unit.ins and unit.ins.get(fslot) == SHARED):
        shape = (unit.size,) + tuple(shape) if unit.stacked else \
            (total_rows(unit, shape[0]),) + tuple(shape[1:])
    return shape_only(tuple(shape), d.dtype)


def joined(unit, entries: list):
    """The values of kept Variables ``entries`` (one per row), concatenated along axis 0."""
    values = []
    for e in entries:
        v = e._value
        if v is None:
            v = read(e._lazy)
        values.append(v)
    if len(values) == 1:
        return values[0]
    return unit.plan.place.array_module().concatenate(values)
