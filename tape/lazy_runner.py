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
from .desc import DENSE_TENSOR, VarDesc
from .pending import LazyOp, order
from .runner import make_outputs, variable_lines
from .variable import Variable


def lazy_lines(info, arrays: list, entries: list) -> list:
    """Lines of the lazy runner of ``info`` after ``plan`` is found; ``arrays`` holds each
    input slot's ``'name': a{i}`` (an array, a ref or a list of them), ``entries`` the eager
    runner's lines that fill a handle's ``entries`` (``tape.OpHandle``)."""
    lines = [
        "    if plan.shaped_by_values:   # output shapes only its values tell: run it now",
        "        return eager_runner(info)(tape, inputs, attrs, outputs)",
        "    grad_flows = plan.requires_grad and not local.no_grad_depth",
        "    tracing = tape.tracing",
        "    record = grad_flows or tracing",
        "    if record and tape._spent:",
        "        raise spent_error(info)",
        "    op = new(LazyOp)",
        "    op.plan = plan",
        f"    op.args = {{{', '.join(arrays)}}}",
        "    op.results = op.batch = op.unit = op.users = op.names = op.record = None",
        "    op.order = next(order)",
        "    serial = tape.serial if record else 0",
        "    if record:",
        "        keeps = info.slot_names if tracing else info.keeps",
        "        entries = {}",    # (before the outputs: one may be an input, written in place)
        *("    " + line.replace("\n", "\n    ") for line in entries),
        "        outs = {}",
        "        h = new(OpHandle)",
        "        h.plan, h.inputs, h.outputs = plan, entries, outs",
        "        tape._ops.append(h)",
        # the tape's list of lazy records, parallel to its handles, gets ``(unit, row)`` when
        # the op runs (the list and an index, not the op: holding the op would keep what it
        # no longer needs alive, and count as a reader to tape.fusion)
        "        deferred = tape.deferred",
        "        if deferred is False:",
        "            deferred = tape.deferred = Records()",
        "        position = len(deferred)",
        "        op.record = (deferred, position)",
        "        deferred.append(None)",
        *_code_lines(info),
        "    made = plan.made if outputs is None else None",
        "    if made is None:",
        "        produced = pending_outputs(op, outputs, grad_flows, serial, place, "
        "(keeps, outs) if record else None)",
        "    else:",
        *_new_output_lines(info),
        "    if flags.checking:     # (names for the NaN/Inf check's message)",
        "        op.names = {slot: [v.name for v in vs] for slot, vs in produced.items()}",
        "    return produced"]
    return lines


class Records(list):
    """A lazy tape's list of records (``Tape.deferred``: per recorded lazy op, where it ran),
    with ``codes``, the *signature of everything recorded so far*, one flat list: per op, its
    CallPlan (op type, attributes, input shapes, dtypes, which want gradients, place), then per
    input the plan says is given, the record position, output slot and index of the op it
    waits for, or None for a value it was given. Two tapes with equal codes recorded the same
    graph, op for op and edge for edge (``tape.lazy_replay`` caches the execution of a
    backward under them). None once an op read a pending value from off this tape, or was
    given its outputs: the codes then name no graph."""

    __slots__ = ("codes",)

    def __init__(self):
        super().__init__()
        self.codes = []


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


def _code_lines(info) -> list:
    """Lines that add the op just recorded to ``deferred.codes`` (see ``Records``)."""
    lines = ["        codes = deferred.codes",
             "        if codes is not None:",
             "            if outputs is not None:",
             "                deferred.codes = None",
             "            else:",
             "                codes.append(plan)"]
    for i, (_, duplicable, dispensable) in enumerate(info.slot_specs):
        indent = "                "
        if dispensable:
            lines.append(f"{indent}if a{i} is not None:")
            indent += "    "
        if duplicable:
            lines += [f"{indent}c = list_code(a{i}, deferred)",
                      f"{indent}if c is None:",
                      f"{indent}    deferred.codes = None",
                      f"{indent}codes.append(c)"]
            continue
        lines += [f"{indent}if type(a{i}) is tuple:",
                  f"{indent}    r = a{i}[0].record",
                  f"{indent}    if r is not None and r[0] is deferred:",
                  f"{indent}        codes += (r[1], a{i}[1], a{i}[2])",
                  f"{indent}    else:",
                  f"{indent}        deferred.codes = None",
                  f"{indent}else:",
                  f"{indent}    codes.append(None)"]
    return lines


def _new_output_lines(info) -> list:
    """Lines that make each output slot's new Variables from ``made``, pending on ``op``
    (``v._lazy`` is the ref ``(op, slot index, index in the slot or -1)``), into
    ``produced``, and their handle's entries into ``outs`` (the Variable where backward reads
    it or the tape traces, else its VarDesc: ``info.keeps`` is fixed when a runner is made)."""
    if len(info.outputs) == 1 and not info.outputs[0].duplicable:    # (most ops)
        name = repr(info.outputs[0].name)
        return ["        m = made[0]",
                "        if m is None:   # (an output the op does not write)",
                "            produced = {}",
                "        else:",
                *variable_lines("            ", "None", True),
                "            v._lazy = (op, 0, -1)",
                f"            produced = {{{name}: [v]}}",
                "            if record:",
                f"                outs[{name}] = " + ("[v]" if info.outputs[0].name in info.keeps
                                                       else "[v] if tracing else [d]")]
    lines = ["        produced = {}"]
    for n, slot in enumerate(info.outputs):
        name = repr(slot.name)
        kept = "vs" if slot.name in info.keeps else "vs if tracing else [v.desc for v in vs]"
        lines += [f"        m = made[{n}]", "        if m is not None:"]
        if slot.duplicable:
            lines += ["            vs = []",
                      "            for j, m in enumerate(m):",
                      *variable_lines("                ", "None", True),
                      f"                v._lazy = (op, {n}, j)",
                      "                vs.append(v)",
                      f"            produced[{name}] = vs",
                      "            if record:",
                      f"                outs[{name}] = {kept}"]
        else:
            lines += [*variable_lines("            ", "None", True),
                      f"            v._lazy = (op, {n}, -1)",
                      f"            produced[{name}] = [v]",
                      "            if record:",
                      f"                outs[{name}] = " + ("[v]" if slot.name in info.keeps
                                                          else "[v] if tracing else [d]")]
    return lines


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
             "DENSE_TENSOR": DENSE_TENSOR, "Records": Records, "list_code": _list_code}
