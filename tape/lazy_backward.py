"""Backward on a tape that recorded lazy ops: the grad ops are deferred too, so that one
execution runs the forward ops the gradients need and the grad ops, batched by the agenda
(``tape.batching``) as forward ops are.

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

import itertools

from . import dtypes
from .backward import _counts, prepare
from .desc import GRAD_SUFFIX
from .grad_steps import FWD_IN, FWD_OUT, IN_GRAD, META_IN, OPT_OUT_GRAD, OUT_GRAD, TEMP
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
    Plain array adds: it runs no kernel and is never batched."""

    __slots__ = ("shapes",)

    def __init__(self, parts: list, shape: tuple):
        super().__init__(None, {"X": parts}, None)
        self.shapes = {(0, -1): shape}

    def run(self) -> None:
        total = None
        for part in self.args["X"]:
            value = read(part) if type(part) is tuple else part
            if value is None:
                continue
            total = value if total is None else total + value
        self.results = (total,)
        self.args = None


def run_lazy_backward(ops: list, loss) -> None:
    """Backward of ``loss`` over ``ops`` (a spent tape's handles, lazy ones among them): grad
    ops deferred, then the leaves' gradients computed in one execution."""
    with collector_paused():
        _run(ops, loss)


def _run(ops: list, loss) -> None:
    xp = loss.place.array_module()
    d = loss.desc
    grads = {d: [xp.ones(d.shape, dtypes.to_numpy(d.dtype))]}
    leaves = {}
    temps = {}
    while ops:
        h = ops.pop()
        outs = [e.desc if type(e) is Variable else e for es in h.outputs.values() for e in es]
        if not any(o in grads for o in outs):
            continue
        for p in prepare(h.plan, _counts(h)):
            _defer_step(p, h, grads, temps, leaves, xp)
        temps.clear()
        for o in outs:
            grads.pop(o, None)
        del h
    if not leaves:
        return
    order = list(leaves)
    values = compute([_gradient(grads, d) for d in order])
    for d, g in zip(order, values):
        if g is None:
            continue
        leaf = leaves[d]
        total = g if leaf.grad is None else leaf.grad._value + g
        leaf.grad = Variable(total, name=d.name + GRAD_SUFFIX, place=leaf.place)


def _desc(entry):
    return entry.desc if type(entry) is Variable else entry


def _value(entry):
    """A kept forward value: its array, or the ref of the op it is pending on."""
    value = entry._value
    if value is not None:
        return value
    ref = getattr(entry, "_lazy", None)
    if ref is not None and ref[0].results is not None:
        return read(ref)
    return ref


def _gradient(grads: dict, d):
    """Variable ``d``'s gradient as one argument: its only part, or their Accumulation."""
    parts = grads[d]
    if len(parts) == 1:
        return parts[0]
    ref = (Accumulation(parts, d.shape), 0, -1)
    grads[d] = [ref]
    return ref


def _argument(kind: int, fslot: str, i: int, h, grads: dict, temps: dict, xp):
    if kind == FWD_IN:
        return _value(h.inputs[fslot][i])
    if kind == FWD_OUT:
        return _value(h.outputs[fslot][i])
    if kind == TEMP:
        return temps[fslot]
    if kind == OUT_GRAD or kind == OPT_OUT_GRAD:
        d = _desc(h.outputs[fslot][i])
        if d in grads:
            return _gradient(grads, d)
        return None if kind == OPT_OUT_GRAD else xp.zeros(d.shape, dtypes.to_numpy(d.dtype))
    if kind == IN_GRAD:
        d = _desc(h.inputs[fslot][i])
        return _gradient(grads, d) if d in grads else None
    d = _desc((h.inputs if kind == META_IN else h.outputs)[fslot][i])
    return ShapeOnly(d.shape, d.dtype)


def _defer_step(p, h, grads: dict, temps: dict, leaves: dict, xp) -> None:
    """Record grad step ``p`` of handle ``h`` as a GradLazyOp and file its outputs as
    gradient parts (or temporaries)."""
    args = {}
    for slot, duplicable, bound in p.ins:
        if duplicable:
            values = (_argument(*ref, h, grads, temps, xp) for ref in bound)
            args[slot] = [v for v in values if v is not None]
        elif bound:
            args[slot] = _argument(*bound[0], h, grads, temps, xp)
    op = GradLazyOp(p.plan, args, None)
    op.wants = p.wants
    op.shapes = {}
    dests = []
    for n, (slot, duplicable, bound) in enumerate(p.outs):
        where = []
        for j, (kind, fslot, i, kept) in enumerate(bound):
            if not kept or slot not in p.wants:
                where.append(None)
                continue
            ref = (op, n, j if duplicable else -1)
            if kind == TEMP:
                temps[fslot] = ref
                where.append(("temp", next(_temp_ids)))
                continue
            e = h.inputs[fslot][i]
            d = _desc(e)
            if type(e) is Variable and e._tape == 0:
                leaves[d] = e
            op.shapes[(n, j if duplicable else -1)] = d.shape
            grads.setdefault(d, []).append(ref)
            where.append(id(d))
        dests.append(tuple(where))
    op.dests = tuple(dests)
