"""Backward on a tape that recorded lazy ops. With batching on and every record of the tape
lazy, it runs unit by unit over the forward batches (``tape.batched_backward``). Otherwise (an
eager record on the tape, batching off, which stays bit for bit eager) the grad ops are
deferred too, so that one execution runs the forward ops the gradients need and the grad ops,
batched by the agenda (``tape.batching``) as forward ops are: this module's per-op path.

The walk is eager backward's (``tape.backward``): the tape in reverse, each handle's prepared
grad steps, the same bindings. Where eager backward invokes a grad step, this one makes a
LazyOp whose inputs are forward values (arrays, or refs to forward ops not run yet), the refs
of gradients already recorded, zeros for an output gradient that never arrived, or the shape
of a no-need-buffer input. A variable's gradient is kept as its list of parts; when a grad op
or a leaf reads it, the parts become one ``Accumulation`` (a sum in arrival order, as eager
backward adds them). At the end the leaves' gradients are computed in one execution and the
handles are gone, so what they kept lives only in the grad ops that read it and goes as they
run.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from . import dtypes, lazy_replay
from . import flags as _flags
from .backward import set_grad
from .batched_backward import run_batched_backward
from .batched_grads import entry_position
from .grad_replay import _counts, argument_lines, gradient_target_lines, prepare
from .grad_steps import FWD_IN, FWD_OUT, IN_GRAD, META_IN, OPT_OUT_GRAD, OUT_GRAD, TEMP
from .lazy_program import build
from .pending import LazyOp, ShapeOnly, collector_paused, compute, read
from .variable import Variable

_temp_ids = itertools.count()


class GradLazyOp(LazyOp):
    """A deferred grad step: a LazyOp that computes only the wanted outputs, with the shapes
    of the gradients it writes and where each output slot's gradients go (``dests``: a batch
    that sums an output over its ops needs them all to go to one variable)."""

    __slots__ = ("wants", "shapes", "dests")


class Accumulation(LazyOp):
    """The sum of a variable's gradient parts, in arrival order (``(a + b) + c``, as eager
    backward adds them); a part that a batch summed into another part is None and skipped.
    Plain array adds, no kernel; Accumulations of the same ``kind`` (number of parts, shape,
    dtype, array module ``xp``) batch: each part concatenated over the batch, then the same
    adds (``tape.batching``)."""

    __slots__ = ("shapes", "kind")

    def __init__(self, parts: list, shape: tuple, dtype: int, xp):
        super().__init__(None, {"X": parts}, None)
        self.shapes = {(0, -1): shape}
        self.kind = ("accumulation", len(parts), shape, dtype, xp) if shape else None

    def run(self) -> None:
        total = None
        for part in self.args["X"]:
            value = read(part) if type(part) is tuple else part
            if value is None:
                continue
            total = value if total is None else total + value
        self.results = (total,)
        self.args = None


def run_lazy_backward(ops: list, loss, records) -> None:
    """Backward of ``loss`` over ``ops`` (a spent tape's handles, lazy ones among them;
    ``records``, the tape's ``deferred``, says where each lazy one ran): with batching on and
    every record lazy, unit by unit over the forward batches (``tape.batched_backward``); else
    grad ops deferred, then the leaves' gradients computed in one execution."""
    with collector_paused():
        try:
            attempt = lazy_replay.attempt(ops, loss, records)
            if attempt is True:     # (a cached program ran it)
                return
            if attempt is not None and attempt.schedule is not None:
                # (found not to batch by units when the schedule was made: no units, as
                # ``run_batched_backward`` then decides)
                records.clear()
            elif _flags.flags["FLAGS_lazy_batching"] and records and len(records) == len(ops):
                turns = None if attempt is None else []
                if run_batched_backward(ops, records, loss, turns):
                    if attempt is not None:
                        attempt.keep_units(turns)
                    return
            if attempt is not None and loss._value is not None:
                attempt.refuse()    # (the loss was computed: batched forward, then refused)
                attempt = None
            _run(ops, loss, attempt)
        finally:
            if records:
                records.clear()     # (the tape's: what its units kept goes with them)


def _run(ops: list, loss, attempt=None) -> None:
    """The per-op path; with ``attempt`` (``lazy_replay``), its execution may become the
    cached program of this graph."""
    global _constants
    xp = loss.place.array_module()
    d = loss.desc
    seed = xp.ones(d.shape, dtypes.to_numpy(d.dtype))
    grads = {d: [seed]}
    if attempt is not None:
        _constants = attempt.constants
        _constants[id(seed)] = (seed, "ones", d.shape, seed.dtype)
    try:
        _defer_all(ops, grads, xp)
    finally:
        _constants = None
    leaves = grads.pop(_LEAVES)
    if not leaves:
        return
    order = list(leaves)
    targets = [_gradient(grads, d, xp) for d in order]
    grads = None
    if attempt is not None and xp is np:
        values = build(attempt, targets, order, leaves)
        if values is None:  # (the program set the gradients)
            return
    else:
        values = compute(targets)
    for d, g in zip(order, values):
        if g is None:
            continue
        set_grad(leaves[d], g)


_LEAVES = object()
_constants = None   # while a program may be built: id -> (array, kind, shape, dtype) of the
                    # constants backward makes


def _defer_all(ops: list, grads: dict, xp) -> None:
    leaves = {}
    temps = {}
    deferrers = _deferrers
    while ops:
        h = ops.pop()
        defer = deferrers.get(h.plan)
        if defer is None:
            defer = _deferrer(h)
        defer(h, grads, temps, leaves, xp)
        del h
    grads[_LEAVES] = leaves


def _desc(entry):
    return entry.desc if type(entry) is Variable else entry


def _pending(entry):
    """A kept forward value that holds no array: the ref of the op it is pending on (its
    value, if that op ran since)."""
    ref = getattr(entry, "_lazy", None)
    if ref is not None and ref[0].results is not None:
        return read(ref)
    return ref


def _gradient(grads: dict, d, xp):
    """Variable ``d``'s gradient as one argument: its only part, or their Accumulation."""
    parts = grads[d]
    if len(parts) == 1:
        return parts[0]
    ref = (Accumulation(parts, d.shape, d.dtype, xp), 0, -1)
    grads[d] = [ref]
    return ref


def _out_gradient(grads: dict, d, xp):
    """The gradient of forward output ``d``, zeros if none arrived."""
    if d in grads:
        return _gradient(grads, d, xp)
    zeros = xp.zeros(d.shape, dtypes.to_numpy(d.dtype))
    if _constants is not None:
        _constants[id(zeros)] = (zeros, "zeros", d.shape, zeros.dtype)
    return zeros


_deferrers: dict = {}


def _single_argument_lines(slot: str, kind: int, fslot: str, i: int, entry) -> list:
    """The lines binding ``args[slot]`` to one input: a forward value (computed if pending) or
    an output gradient written out for their common cases, else ``_argument_expression``
    (``entry(0 or 1, fslot, i)``: the code of the handle's entry for input or output
    ``fslot[i]``)."""
    if kind == FWD_IN or kind == FWD_OUT:
        return [f"    e = {entry(0 if kind == FWD_IN else 1, fslot, i)}",
                "    v = e._value",
                f"    args[{slot!r}] = _pending(e) if v is None else v"]
    if kind == OUT_GRAD:     # (``_out_gradient``, written out for its common case)
        return [f"    e = {entry(1, fslot, i)}",
                "    d = e.desc if type(e) is Variable else e",
                "    parts = grads.get(d)",
                f"    args[{slot!r}] = parts[0] if parts is not None and "
                "len(parts) == 1 else _out_gradient(grads, d, xp)"]
    return [f"    args[{slot!r}] = {_argument_expression(kind, fslot, i, entry)}"]


def _deferrer(h):
    """``defer(h, grads, temps, leaves, xp)`` for handles of ``h``'s plan (made once per plan,
    as eager backward's replay is): straight code that returns at once unless a gradient
    arrived at one of the handle's outputs, then, per prepared grad step, gathers the
    GradLazyOp's arguments (forward values or refs, gradient refs, zeros, shapes), makes it,
    and files its outputs as gradient parts (or temporaries), as eager backward's written-out
    step (``tape.grad_replay``) does with values; last, it drops the gradients of the handle's
    outputs."""
    plan = h.plan
    counts = _counts(h)
    prepared = plan.backward
    if prepared is None:
        prepared = prepare(plan, counts)

    def entry(which: int, fslot: str, i: int) -> str:
        # (read where the EagerHandle keeps it: its inputs and outputs views cost a dict and
        # a list per slot per handle)
        return f"es[{entry_position(plan, which, fslot, i)}]"
    lines = ["def defer(h, grads, temps, leaves, xp):",
             "    es = h.entries"]
    outputs = []
    for slot, n in counts[1].items():
        for i in range(n):
            o = f"o{len(outputs)}"
            outputs.append(o)
            lines += [f"    e = {entry(1, slot, i)}",
                      f"    {o} = e.desc if type(e) is Variable else e"]
    reached = " or ".join(f"{o} in grads" for o in outputs) or "False"
    lines += [f"    if not ({reached}):", "        return"]
    namespace = {"GradLazyOp": GradLazyOp, "Variable": Variable, "_pending": _pending,
                 "_gradient": _gradient, "_out_gradient": _out_gradient, "_desc": _desc,
                 "ShapeOnly": ShapeOnly, "temp_ids": _temp_ids}
    for k, p in enumerate(prepared):
        namespace[f"p{k}"] = p
        lines += _step_lines(p, k, entry)
    if any(kind == TEMP for p in prepared for _, _, bound in p.outs for kind, *_ in bound):
        lines.append("    temps.clear()")
    lines += [f"    grads.pop({o}, None)" for o in outputs]
    name = f"<lazy backward of {prepared[0].plan.info.type if prepared else 'an op'}>"
    exec(compile("\n".join(lines), name, "exec"), namespace)
    if len(_deferrers) >= 4096:
        _deferrers.clear()
    defer = _deferrers[h.plan] = namespace["defer"]
    return defer


def _step_lines(p, k: int, entry) -> list:
    """The lines that defer prepared grad step ``p``, the ``k``-th of its forward op's
    (``p<k>`` in the written-out function's namespace; ``entry``, as for
    ``_single_argument_lines``)."""
    lines = [*argument_lines(p, functools.partial(_argument_expression, entry=entry),
                             functools.partial(_single_argument_lines, entry=entry)),
             f"    op = GradLazyOp(p{k}.plan, args, None)",
             f"    op.wants = p{k}.wants",
             "    op.shapes = shapes = {}"]
    dests = []
    for n, (slot, duplicable, bound) in enumerate(p.outs):
        where = []
        for j, (kind, fslot, i, kept) in enumerate(bound):
            if not kept or slot not in p.wants:
                where.append("None")
                continue
            index = j if duplicable else -1
            if kind == TEMP:
                lines.append(f"    temps[{fslot!r}] = (op, {n}, {index})")
                where.append("('temp', next(temp_ids))")
                continue
            lines += [*gradient_target_lines(fslot, i, "    ", entry(0, fslot, i)),
                      f"    shapes[({n}, {index})] = d.shape",
                      "    parts = grads.get(d)",
                      "    if parts is None:",
                      f"        grads[d] = [(op, {n}, {index})]",
                      "    else:",
                      f"        parts.append((op, {n}, {index}))",
                      f"    d{n}_{j} = id(d)"]
            where.append(f"d{n}_{j}")
        dests.append(f"({', '.join(where)},)" if where else "()")
    lines.append(f"    op.dests = ({', '.join(dests)},)" if dests else "    op.dests = ()")
    return lines


def _argument_expression(kind: int, fslot: str, i: int, entry) -> str:
    """What a written-out deferral evaluates for a grad-op input bound as ``(kind, fslot, i)``
    (``entry``, as for ``_single_argument_lines``): None for an optional gradient that never
    arrived."""
    if kind == FWD_IN or kind == FWD_OUT:
        e = entry(0 if kind == FWD_IN else 1, fslot, i)
        return f"({e}._value if {e}._value is not None else _pending({e}))"
    if kind == TEMP:
        return f"temps[{fslot!r}]"
    if kind == OUT_GRAD:
        return f"_out_gradient(grads, _desc({entry(1, fslot, i)}), xp)"
    if kind == OPT_OUT_GRAD or kind == IN_GRAD:
        d = f"_desc({entry(1 if kind == OPT_OUT_GRAD else 0, fslot, i)})"
        return f"(_gradient(grads, {d}, xp) if {d} in grads else None)"
    d = f"_desc({entry(0 if kind == META_IN else 1, fslot, i)})"
    return f"ShapeOnly({d}.shape, {d}.dtype)"
