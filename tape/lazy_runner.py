"""The tail of a lazy runner: what it does once the op's CallPlan is found (``tape.runner``
writes the head, the input checks and the plan's lookup, as for an eager one).

Where an eager runner calls the kernel, a lazy one makes the op's ``LazyOp`` (``tape.pending``)
and new output Variables pending on it, written out from ``CallPlan.made`` for the op's
output slots as an eager runner's are: no generic loop over slots, no intermediate dicts,
every object made directly. Recording is most of a lazy op's cost on the forward pass (its
kernel runs later, batched), so this is the path to keep short; given outputs, or outputs
whose shapes need the generic path, go through ``runner.make_outputs``.
"""
from __future__ import annotations

from . import flags as _flags
from .desc import VarDesc
from .pending import LazyOp, order
from .runner import GRAD_FLOWS, made_lines, make_outputs, pending_lines
from .variable import Variable


def lazy_lines(info, flat: list, parts: list) -> list:
    """Lines of the lazy runner of ``info`` after ``plan`` is found; ``flat`` holds the eager
    runner's lines that bind each input slot's handle entries, ``parts`` how they go into an
    EagerHandle's ``entries`` (``tape.runner``)."""
    single = len(info.outputs) == 1
    named = ["    if flags.checking:     # (names for the NaN/Inf check's message)",
             "        op.names = {slot: [v.name for v in vs] for slot, vs in produced.items()}"]
    filed = _record_lines(True)
    return [
        "    if plan.shaped_by_values:   # output shapes only its values tell: run it now",
        "        return eager_runner(info)(tape, inputs, attrs, outputs)",
        GRAD_FLOWS,
        "    tracing = tape.tracing",
        "    record = grad_flows or tracing",
        "    if record and tape._spent:",
        "        raise spent_error(info)",
        *_op_lines(info, [f"a{i}" for i in range(len(info.inputs))]),
        "    made = plan.made if outputs is None else None",
        "    if not record:",
        *("    " + line for line in made_lines(info, single, False, lazy=True, tail=named)),
        "        produced = pending_outputs(op, outputs, False, 0, place, None)",
        *("    " + line for line in named),
        "        return produced",
        # (the inputs' entries before the outputs: a given output may be an input, written
        # in place)
        *flat,
        *made_lines(info, single, True, parts, lazy=True, tail=(*filed, *named)),
        "    keeps = info.slot_names if tracing else info.keeps",
        "    outs = {}",
        "    produced = pending_outputs(op, outputs, grad_flows, tape.serial, place, "
        "(keeps, outs))",
        "    h = EagerHandle()",
        f"    h.plan, h.entries = plan, ({''.join(p + ', ' for p in parts)}"
        "*[e for es in outs.values() for e in es],)",
        "    tape._ops.append(h)",
        # the tape's list of lazy records, parallel to its handles, gets ``(unit, row)`` when
        # the op runs (the list and an index, not the op: holding the op would keep what it
        # no longer needs alive, and count as a reader to tape.fusion)
        *filed,
        *named,
        "    return produced"]


def gather_many_lines(i: int, name: str, dispensable: bool, kept: bool) -> list:
    """A lazy runner's lines for duplicable slot ``i`` (``name``): what ``runner._gather``
    binds, by ``gather_many``'s checks in its order in one loop (a pending input's ref read in
    place, as ``pending_ref`` reads it); ``stale{i}``, whether ``check_stale`` must raise;
    and for a slot the op does not keep, ``e{i}``, its handle entries (the eager runner's
    ``flat``). Inputs that all have the first one's shape, dtype and stop_gradient (the
    commonest list: a concat of a sequence's steps) key as ``(-count, shape, dtype,
    stop_gradient)``, not as ``gather_many``'s tuple per input: a key hashed in a tenth of the
    time, never equal to one of those (their count is positive)."""
    n = repr(name)
    absent = (f"        vs{i} = k{i} = a{i} = None" + ("" if kept else f"\n        e{i} = ()")
              if dispensable else f"        raise count_error(info, {n}, vs{i})")
    names, values, appended = ("", "", ()) if kept else (f", e{i}, tracing", ", [], tape.tracing",
        (f"            e{i}.append(v if tracing or not (stop_gradient or t) else d)",))
    return [f"    vs{i}, stale{i} = inputs.get({n}), False",
            f"    if vs{i}:",
            f"        a{i}{names}, serial, alike = []{values}, tape.serial, True",
            f"        if isinstance(first := vs{i}[0], Variable):",
            "            shape, dtype, stop = first.desc.shape, first.desc.dtype, "
            "first.desc.stop_gradient",
            f"        for v in vs{i}:",
            "            if type(v) is not Variable and not isinstance(v, Variable):",
            f"                raise not_variable(info, {n}, v)",
            "            d = v.desc",
            "            value = v._value",
            *pending_lines("value", "v", f"value = unset(info, {n}, v)", "            "),
            "            if v.place is not place:",
            f"                place = common_place(info, inputs, place, {n}, v)",
            "            t, stop_gradient = v._tape, d.stop_gradient",
            "            if t != serial and t and not stop_gradient:",
            f"                stale{i} = True",
            # (the shapes of one op's outputs are one tuple: compared only where another one
            # comes, which the next inputs are then compared with)
            "            if d.shape is not shape:",
            "                if d.shape != shape:",
            "                    alike = False",
            "                shape = d.shape",
            "            if d.dtype != dtype or stop_gradient is not stop:",
            "                alike = False",
            f"            a{i}.append(value)",
            *appended,
            f"        k{i} = (-len(vs{i}), shape, dtype, stop) if alike else (len(vs{i}), *[",
            f"            (v.desc.shape, v.desc.dtype, v.desc.stop_gradient) for v in vs{i}])",
            "    else:",
            absent]


class Records(list):
    """A lazy tape's list of records (``Tape.deferred``): per recorded lazy op, in record
    order, None until it runs, then where it ran (``tape.units``). Record ``p`` is the op of
    the tape's handle ``p``: the two are appended together, so ``tape.lazy_replay`` reads each
    op's CallPlan from the handles, and a LazyOp's ``record`` gives its position.
    ``outputs_given``: whether an op was given its outputs (the general runner's
    ``outputs``), which leaves the tape's graph without a cached backward."""

    __slots__ = ("outputs_given",)

    def __init__(self):
        super().__init__()
        self.outputs_given = False


def _record_lines(given_outputs: bool) -> list:
    """Lines (indented 4) that file the op just recorded in its tape's ``deferred`` (see
    ``Records``); with ``given_outputs``, note there whether the runner's ``outputs`` were
    given.

    Nothing more is written per op: the signature the cached backward keys a graph by is read
    at backward, from the handles (each op's CallPlan) and by its walker from the ops
    themselves (``tape.lazy_replay``), so recording pays nothing for it."""
    lines = ["    deferred = tape.deferred",     # (a LazyTape's, made with it)
             "    op.record = (deferred, len(deferred))",
             "    deferred.append(None)"]
    if given_outputs:
        lines += ["    if outputs is not None:",
                  "        deferred.outputs_given = True"]
    return lines


def _op_lines(info, arrays: list, filed: bool = False, template: str | None = None) -> list:
    """Lines that make ``op``, the LazyOp of ``plan`` reading ``arrays`` (per input slot, the
    expression of its array, ref or list of them); ``filed``: its ``record`` is set later.
    With ``template`` (the name of a dict of every input slot's array), ``arrays`` gives only
    the leading slots' and the rest are the template's: its copy, those slots set, is the
    op's ``args`` (a dict of seven copied is 40% cheaper than one built)."""
    if template is None:
        args = ["    op.args = {" + ", ".join(f"{s.name!r}: {a}"
                                              for s, a in zip(info.inputs, arrays)) + "}"]
    else:
        args = [f"    op.args = op_args = {template}.copy()",
                *(f"    op_args[{s.name!r}] = {a}" for s, a in zip(info.inputs, arrays))]
    return ["    op = new(LazyOp)",
            "    op.plan = plan",
            *args,
            "    op.results = op.batch = op.unit = op.users = op.names = "
            + ("None" if filed else "op.record = None"),
            "    op.order = next(order)"]


def positional_tail(info, arrays: list, template: str | None = None) -> tuple:
    """``(head, tail)``: the lines of a lazy positional runner (``tape.positional``) that make
    its LazyOp, in place of the kernel call, and that file a recorded one in the tape's
    ``deferred`` after its handle. ``arrays``: per input slot, ``a{i}`` or None (with
    ``template``, the leading slots' only: see ``_op_lines``)."""
    return _op_lines(info, arrays, True, template), _record_lines(False)


_stand_ins: dict = {}


def pending_outputs(op, outputs, grad_flows: bool, serial: int, place, recording) -> dict:
    """``{slot: [Variable]}`` of ``op``'s outputs by the generic path (``runner.make_outputs``:
    given ``outputs`` filled in, or new Variables), each left pending on ``op``."""
    plan = op.plan
    stand_ins = _stand_ins.get(plan)    # what make_outputs reads in place of the kernel's result
    if stand_ins is None:
        if len(_stand_ins) >= 4096:
            _stand_ins.clear()
        stand_ins = _stand_ins[plan] = tuple(
            [None] * len(spec) if duplicable and spec else None
            for _, duplicable, spec, _ in plan.outputs)
    produced = make_outputs(plan, stand_ins, outputs, grad_flows, serial, place, recording)
    for n, (slot, duplicable, spec, _) in enumerate(plan.outputs):
        if not spec:
            continue
        if duplicable:
            for j, v in enumerate(produced[slot]):
                v._lazy = (op, n, j)
        else:
            produced[slot][0]._lazy = (op, n, -1)
    return produced


NAMESPACE = {"LazyOp": LazyOp, "order": order, "pending_outputs": pending_outputs,
             "flags": _flags, "new": object.__new__, "VarDesc": VarDesc, "Variable": Variable}
