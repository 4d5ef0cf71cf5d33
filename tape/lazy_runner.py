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
from . import lazy_replay
from .desc import VarDesc
from .pending import LazyOp, order
from .runner import GRAD_FLOWS, made_lines, make_outputs
from .variable import Variable


def lazy_lines(info, flat: list, parts: list) -> list:
    """Lines of the lazy runner of ``info`` after ``plan`` is found; ``flat`` holds the eager
    runner's lines that bind each input slot's handle entries, ``parts`` how they go into an
    EagerHandle's ``entries`` (``tape.runner``)."""
    single = len(info.outputs) == 1
    named = ["    if flags.checking:     # (names for the NaN/Inf check's message)",
             "        op.names = {slot: [v.name for v in vs] for slot, vs in produced.items()}"]
    filed = _record_lines(info, info.slot_specs, True)
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


class Records(list):
    """A lazy tape's list of records (``Tape.deferred``: per recorded lazy op, where it ran),
    with ``codes``, the *signature of everything recorded so far*, one flat list: per op, its
    CallPlan (op type, attributes, input shapes, dtypes, which want gradients, place), then per
    input the plan says is given, the record position, output slot and index of the op it
    waits for, or None for a value it was given. Two tapes with equal codes recorded the same
    graph, op for op and edge for edge (``tape.lazy_replay`` caches the execution of a
    backward under them). None once an op read a pending value from off this tape, or was
    given its outputs, or once they grew past the longest lazy_replay keeps a program for:
    the codes then name no graph."""

    __slots__ = ("codes",)

    def __init__(self):
        super().__init__()
        self.codes = []

    def coding(self) -> bool:
        """Whether the codes still name a graph ``tape.lazy_replay`` may keep a program for:
        past its length limit they are dropped (None), and no longer built."""
        if len(self.codes) > lazy_replay.MAX_CODES:    # (lazy_replay's limit)
            self.codes = None
            return False
        return True


def _list_code(refs: list, deferred) -> tuple:
    """The code of a slot that takes several inputs (None: one waits for an op off the
    tape)."""
    codes = []
    for a in refs:
        if type(a) is tuple:
            r = a[0].record
            if r is None or r[0] is not deferred:
                return None
            codes.append((r[1], a[1], a[2]))
        else:
            codes.append(None)
    return tuple(codes)


def _record_lines(info, slots, given_outputs: bool) -> list:
    """Lines (indented 4) that file the op just recorded in its tape's ``deferred`` and add it
    to ``deferred.codes`` (see ``Records``): its input slots ``slots`` (each input's array or
    ref in ``a{i}``, in the op's slot order) and, with ``given_outputs``, the runner's
    ``outputs``, which leave the codes naming no graph when given."""
    lines = ["    deferred = tape.deferred",     # (a LazyTape's, made with it)
             "    position = len(deferred)",
             "    op.record = (deferred, position)",
             "    deferred.append(None)",
             "    codes = deferred.codes",
             # (every 256 ops, whether the codes grew past what names a graph: then no more)
             "    if codes is not None and (position & 255 != 255 or deferred.coding()):"]
    indent = "        "
    if given_outputs:
        lines += [f"{indent}if outputs is not None:",
                  f"{indent}    deferred.codes = None",
                  f"{indent}else:"]
        indent += "    "
    # (the plan goes in with the first slot's code when that slot takes one input always)
    planned = bool(slots) and not (slots[0][1] or slots[0][2])
    if not planned:
        lines.append(f"{indent}codes.append(plan)")
    for i, (_, duplicable, dispensable) in enumerate(slots):
        inner = indent
        plan = "plan, " if planned and i == 0 else ""
        if dispensable:
            lines.append(f"{inner}if a{i} is not None:")
            inner += "    "
        if duplicable:
            lines += [f"{inner}c = list_code(a{i}, deferred)",
                      f"{inner}if c is None:",
                      f"{inner}    deferred.codes = None",
                      f"{inner}codes.append(c)"]
            continue
        lines += [f"{inner}if type(a{i}) is tuple:",
                  f"{inner}    r = a{i}[0].record",
                  f"{inner}    if r is not None and r[0] is deferred:",
                  f"{inner}        codes += ({plan}r[1], a{i}[1], a{i}[2])",
                  f"{inner}    else:",
                  f"{inner}        deferred.codes = None",
                  f"{inner}else:",
                  f"{inner}    codes += ({plan}None,)" if plan else
                  f"{inner}    codes.append(None)"]
    return lines


def _op_lines(info, arrays: list, filed: bool = False) -> list:
    """Lines that make ``op``, the LazyOp of ``plan`` reading ``arrays`` (per input slot, the
    expression of its array, ref or list of them); ``filed``: its ``record`` is set later."""
    return ["    op = new(LazyOp)",
            "    op.plan = plan",
            "    op.args = {" + ", ".join(f"{s.name!r}: {a}" for s, a in zip(info.inputs, arrays))
            + "}",
            "    op.results = op.batch = op.unit = op.users = op.names = "
            + ("None" if filed else "op.record = None"),
            "    op.order = next(order)"]


def positional_tail(info, arrays: list) -> tuple:
    """``(head, tail)``: the lines of a lazy positional runner (``tape.positional``) that make
    its LazyOp, in place of the kernel call, and that file a recorded one in the tape's
    ``deferred`` after its handle. ``arrays``: per input slot, ``a{i}`` or None."""
    given = [spec for spec, a in zip(info.slot_specs, arrays) if a != "None"]
    return _op_lines(info, arrays, filed=True), _record_lines(info, given, False)


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
             "flags": _flags, "new": object.__new__, "VarDesc": VarDesc, "Variable": Variable,
             "list_code": _list_code}
