"""Grad steps written out: what eager backward runs for each recorded op, made once per plan.

A recorded op's grad steps (``tape.grad_steps``) are prepared once per CallPlan (``prepare``):
each step's kernel for the plan's place and dtype, the output slots it must compute (those
leading to an input that wants a gradient), and which gradients it writes are kept. From that,
``replay_of`` writes one straight function per plan (``replay``) that binds each grad op's
inputs from a handle's entries, calls its kernel and files the gradients it writes; replaying a
handle is then a call with no string work and no kernel lookup. Lazy and batched backward use
the same preparation and the lines that bind arguments.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from . import flags as _flags
from .desc import GRAD_SUFFIX
from .dispatch import CallPlan, invoke
from .grad_steps import (
    FWD_IN,
    FWD_OUT,
    IN_GRAD,
    META_IN,
    META_OUT,
    OPT_OUT_GRAD,
    OUT_GRAD,
    TEMP,
    GradStep,
    grad_steps,
)
from .variable import Variable


class _Prepared:
    """A grad step bound to one forward CallPlan: the grad op's own CallPlan (the forward's
    place, dtype and attributes), its slots' bindings, and the output slots it must compute."""

    __slots__ = ("ins", "outs", "wants", "plan", "add_into")

    def __init__(self, step: GradStep, forward: CallPlan):
        self.ins = step.ins
        wants_grad = forward.wants_grad
        # ((slot, duplicable, ((kind, forward slot or temporary, index, kept), ...)), ...):
        # ``kept`` says whether a gradient written there is used (its input wants one).
        self.outs = tuple(
            (slot, duplicable, tuple((kind, fslot, i, kind == TEMP or wants_grad[fslot][i])
                                     for kind, fslot, i in bound))
            for slot, duplicable, bound in step.outs)
        self.wants = {slot for slot, _, bound in self.outs if any(k for *_, k in bound)}
        if not self.wants:      # (left out by ``prepare``: it needs no kernel, which an
            return              # integer reshape's gradient has none of)
        attrs = forward.attrs if step.attrs is None else step.attrs
        self.plan = CallPlan(step.info, attrs, None, forward.place, forward.dtype)
        # the kernel's call that adds its gradients into the sums backward keeps for them
        # (``Kernel.adding_call``), for a step whose every gradient is one forward input's
        adding_call = getattr(self.plan.kernel, "adding_call", None)    # (stand-in kernels)
        into = adding_call and adding_call()
        written = [ref for _, _, bound in self.outs for ref in bound if ref[3]]
        self.add_into = into if written and all(ref[0] == IN_GRAD for ref in written) and \
            not any(duplicable for _, duplicable, _ in self.outs) else None


def _write_replay(prepared: tuple, counts: tuple):
    """``replay(h, grads, temps, leaves, summed)`` of a forward plan's ``prepared`` grad steps,
    for handles with ``counts`` (``_counts``): straight code that returns at once unless a
    gradient arrived at one of the handle's outputs, then runs each step (gathers the grad op's
    inputs, calls its kernel, adds each gradient it writes to what arrived for its forward
    input, or keeps it as a temporary), then drops the gradients of the handle's outputs.

    A variable's gradient parts are summed into a new array, which takes any further parts in
    place (a kernel's output may be shared, so it is never written)."""
    lines = ["def replay(h, grads, temps, leaves, summed):",
             "    es = h.entries"]
    # (FWD_IN or FWD_OUT, forward slot, index) -> its position in an EagerHandle's entries
    at = {}
    for kind, slots in ((FWD_IN, counts[0]), (FWD_OUT, counts[1])):
        for slot, n in slots.items():
            for i in range(n):
                at[kind, slot, i] = len(at)
    outputs = {}    # (forward output slot, index) -> the local holding its VarDesc
    for slot, n in counts[1].items():
        for i in range(n):
            o = outputs[slot, i] = f"o{len(outputs)}"
            lines += [f"    e = es[{at[FWD_OUT, slot, i]}]",
                      f"    {o} = e.desc if type(e) is Variable else e"]
    reached = " or ".join(f"{o} in grads" for o in outputs.values()) or "False"
    lines += [f"    if not ({reached}):", "        return"]
    namespace = {"invoke": invoke, "flags": _flags, "Variable": Variable,
                 "_grad_names": _grad_names, "_desc": _desc,
                 "_shape_of": _shape_of, "_zeros": _zeros, "shape_only": shape_only,
                 "_shape_only_cache": _shape_only_cache}
    for n, p in enumerate(prepared):
        namespace.update({f"p{n}": p, f"direct{n}": p.plan.direct, f"attrs{n}": p.plan.attrs,
                          f"wants{n}": p.wants, f"into{n}": p.add_into})
        lines += _step_lines(p, n, outputs, at)
    if any(kind == TEMP for p in prepared for _, _, bound in p.outs for kind, *_ in bound):
        lines.append("    temps.clear()")
    lines += [f"    grads.pop({o}, None)" for o in outputs.values()]
    if outputs:
        lines += ["    if summed:", *(f"        summed.discard({o})" for o in outputs.values())]
    name = f"<backward of {prepared[0].plan.info.type if prepared else 'an op'}>"
    exec(compile("\n".join(lines), name, "exec"), namespace)
    return namespace["replay"]


def _step_lines(p: _Prepared, n: int, outputs: dict, at: dict) -> list:
    """The lines of prepared grad step ``p``, the ``n``-th of its forward op's: its inputs
    bound one per grad-op slot (``x<slot index>``), its kernel called directly (through
    ``invoke`` when a check is on), its gradients added or kept. ``outputs`` names the locals
    that hold the forward outputs' VarDescs; ``at`` gives each forward entry's position in
    the handle's ``entries``."""
    def value(kind, fslot, i):
        return _value_expression(kind, fslot, i, at, outputs)

    ginfo = p.plan.info
    index = {s.name: k for k, s in enumerate(ginfo.inputs)}
    given = []
    lines = []
    for slot, duplicable, bound in p.ins:
        if not bound:
            continue
        k = index[slot]
        given.append((slot, k))
        if duplicable:
            values = []
            for j, (kind, fslot, i) in enumerate(bound):
                if kind == OUT_GRAD:
                    lines += _out_grad_lines(f"x{k}_{j}", outputs[fslot, i])
                    values.append(f"x{k}_{j}")
                else:
                    values.append(value(kind, fslot, i))
            lines.append(f"    x{k} = [v for v in ({', '.join(values)},) if v is not None]")
        elif bound[0][0] == OUT_GRAD:
            lines += _out_grad_lines(f"x{k}", outputs[bound[0][1:]])
        elif bound[0][0] in (META_IN, META_OUT):    # (``_shape_of``, written out)
            kind, fslot, i = bound[0]
            lines += [f"    e = es[{at[FWD_IN if kind == META_IN else FWD_OUT, fslot, i]}]",
                      "    d = e.desc if type(e) is Variable else e",
                      f"    x{k} = _shape_only_cache.get((d.shape, d.dtype))",
                      f"    if x{k} is None:",
                      f"        x{k} = shape_only(d.shape, d.dtype)"]
        else:
            lines.append(f"    x{k} = {value(*bound[0])}")
    present = dict(given)
    arrays = "".join(f", x{present[s.name]}" if s.name in present else ", None"
                     for s in ginfo.inputs)
    single = len(ginfo.outputs) == 1
    call = ["    if flags.checking:",
            f"        args = {{{', '.join(f'{slot!r}: x{k}' for slot, k in given)}}}",
            f"        result = invoke(p{n}.plan, args, wants{n}, _grad_names(p{n}, h))"
            + ("[0]" if single else ""),
            "    else:",
            f"        result = direct{n}(attrs{n}, wants{n}{arrays})"]
    if p.add_into is not None:
        return lines + _added_into_lines(p, n, at, arrays, call, single)
    lines += call
    for m, (slot, duplicable, bound) in enumerate(p.outs):
        if slot not in p.wants:
            continue
        r = "result" if single else f"result[{m}]"
        for j, (kind, fslot, i, kept) in enumerate(bound):
            if not kept:
                continue
            lines.append(f"    g = {r}[{j}] if {r} is not None else None" if duplicable
                         else f"    g = {r}")
            lines.append("    if g is not None:")
            if kind == TEMP:
                lines.append(f"        temps[{fslot!r}] = g")
                continue
            lines += [*gradient_target_lines(fslot, i, "        ", f"es[{at[FWD_IN, fslot, i]}]"),
                      *_sum_lines("        ", fresh=False)]
    return lines


def _added_into_lines(p: _Prepared, n: int, at: dict, arrays: str, call: list,
                      single: bool) -> list:
    """The lines of a step whose kernel adds into sums (``p.add_into``): where backward holds a
    sum of its own for one of the step's gradients, the kernel adds into it (an embedding's rows
    into the table) and returns the others; else, and whenever a check is on, ``call`` runs the
    kernel. Its new arrays become (or are added to) the sums."""
    written = {slot: bound[0][1:3] for slot, _, bound in p.outs if bound and bound[0][3]}
    lines, targets = [], []
    for m, s in enumerate(p.plan.info.outputs):
        if s.name not in written:
            targets.append("None")
            continue
        fslot, i = written[s.name]
        lines += [f"    e{m} = es[{at[FWD_IN, fslot, i]}]",
                  f"    d{m} = e{m}.desc if type(e{m}) is Variable else e{m}",
                  f"    t{m} = grads.get(d{m})",
                  f"    if t{m} is not None and d{m} not in summed:",
                  f"        t{m} = None"]
        targets.append(f"t{m}")
    some = " or ".join(f"{t} is not None" for t in targets if t != "None")
    lines += [f"    if ({some}) and not flags.checking:",
              f"        result = into{n}(({', '.join(targets)},), attrs{n}, wants{n}{arrays})",
              "    else:",
              *("    " + line for line in call)]
    for m, s in enumerate(p.plan.info.outputs):
        if s.name in written:
            lines += [f"    g = {'result' if single else f'result[{m}]'}",
                      "    if g is not None:",
                      f"        e, d = e{m}, d{m}",
                      "        if type(e) is Variable and e._tape == 0:",
                      "            leaves[d] = e",
                      *_sum_lines("        ", fresh=True)]
    return lines


def _sum_lines(indent: str, fresh: bool) -> list:
    """Lines that add gradient ``g`` to the sum kept for VarDesc ``d``: the first is taken as
    it is (and, ``fresh`` from a kernel whose arrays nothing else holds, is a sum of its own),
    a later one added in place into a sum backward made, or else into a new sum."""
    return [indent + line for line in (
        "old = grads.get(d)",
        "if old is None:",
        "    grads[d] = g",
        *(["    summed.add(d)    # the kernel's new array: nothing else holds it"] if fresh
          else []),
        "elif d in summed:    # a sum made earlier: nothing else holds it",
        "    old += g",
        "    grads[d] = old   # (a 0-d sum is a numpy scalar: += made a new one)",
        "else:",
        "    grads[d] = old + g",
        "    summed.add(d)")]


def argument_lines(p: _Prepared, expression, single=None) -> list:
    """Written-out lines that bind ``args``, the grad op's inputs of prepared step ``p``:
    ``expression(kind, fslot, i)`` is the code of one bound input, or ``single(slot, kind,
    fslot, i)`` gives the lines of a slot that takes one. An optional input the forward op was
    not given is left out."""
    lines = ["    args = {}"]
    for slot, duplicable, bound in p.ins:
        if not bound:
            continue
        if duplicable:
            values = ", ".join(expression(*ref) for ref in bound)
            lines.append(f"    args[{slot!r}] = [v for v in ({values},) if v is not None]")
        elif single is not None:
            lines += single(slot, *bound[0])
        else:
            lines.append(f"    args[{slot!r}] = {expression(*bound[0])}")
    return lines


def gradient_target_lines(fslot: str, i: int, indent: str, entry: str | None = None) -> list:
    """Written-out lines that bind ``d``, the VarDesc of forward input ``fslot[i]`` (whose
    gradient a step writes), and note a leaf Variable in ``leaves``: the entry is ``entry``'s
    code, by default ``ins[fslot][i]`` of handle inputs ``ins``."""
    return [indent + line for line in (f"e = {entry or f'ins[{fslot!r}][{i}]'}",
                                       "if type(e) is Variable:",
                                       "    d = e.desc",
                                       "    if e._tape == 0:",
                                       "        leaves[d] = e",
                                       "else:",
                                       "    d = e")]


def _out_grad_lines(target: str, o: str) -> list:
    """Lines that bind ``target`` to the gradient of the forward output whose VarDesc local
    ``o`` holds, zeros when none arrived."""
    return [f"    {target} = grads.get({o})",
            f"    if {target} is None:",
            f"        {target} = _zeros(h, {o})"]


def _value_expression(kind: int, fslot: str, i: int, at: dict, outputs: dict) -> str:
    """What a written-out step evaluates for a grad-op input bound as ``(kind, fslot, i)``
    (``at``: the positions of the handle's entries; ``outputs``: the locals holding its
    outputs' VarDescs): None for an optional gradient that never arrived. (An output's
    gradient, zeros when none arrived, is bound by ``_out_grad_lines``.)"""
    if kind == TEMP:
        return f"temps[{fslot!r}]"
    if kind == OPT_OUT_GRAD:
        return f"grads.get({outputs[fslot, i]})"
    e = f"es[{at[FWD_IN if kind in (FWD_IN, META_IN, IN_GRAD) else FWD_OUT, fslot, i]}]"
    if kind == FWD_IN or kind == FWD_OUT:
        return f"{e}._value"
    if kind == IN_GRAD:
        return f"grads.get(_desc({e}))"
    return f"_shape_of({e})"


def prepare(plan: CallPlan, counts) -> tuple:
    """The grad steps of ``plan`` that compute a wanted gradient, ready to run (cached on the
    plan). ``counts`` gives ``(input counts, output counts)`` by slot, as recorded."""
    prepared = plan.backward
    if prepared is None:
        ins, outs = counts
        steps = grad_steps(plan.info, ins, outs, plan.attrs, plan.attrs_key)
        prepared = (_Prepared(s, plan) for s in steps)
        prepared = plan.backward = tuple(p for p in prepared if p.wants)
    return prepared


def replay_of(h):
    """The replay of handle ``h``'s plan (made once per plan, kept on it)."""
    counts = _counts(h)
    replay = h.plan.replay = _write_replay(prepare(h.plan, counts), counts)
    return replay


def grad_op_types(h) -> list:
    """The grad op types backward runs for the recorded op ``h``."""
    return list(dict.fromkeys(p.plan.info.type for p in prepare(h.plan, _counts(h))))


def _counts(h) -> tuple:
    return ({s: len(v) for s, v in h.inputs.items()}, {s: len(v) for s, v in h.outputs.items()})


_shape_only_cache: dict = {}


def shape_only(shape, dtype) -> np.ndarray:
    """A read-only array with a shape and dtype but no buffer (zero strides): what a grad kernel
    gets for a no-need-buffer input, whose values the tape did not keep. Cached per shape."""
    key = (shape, dtype)
    a = _shape_only_cache.get(key)
    if a is None:
        if len(_shape_only_cache) >= 4096:
            _shape_only_cache.clear()
        a = np.broadcast_to(np.zeros((), dtypes.to_numpy(dtype)), shape)
        _shape_only_cache[key] = a
    return a


def _desc(entry):
    return entry.desc if type(entry) is Variable else entry


def _zeros(h, d):
    """Zeros in the shape and dtype of VarDesc ``d``, on handle ``h``'s place."""
    return h.plan.place.array_module().zeros(d.shape, dtypes.to_numpy(d.dtype))


def _shape_of(entry) -> np.ndarray:
    """A shape-only stand-in for forward value ``entry`` (a no-need-buffer input)."""
    d = _desc(entry)
    return shape_only(d.shape, d.dtype)


def _grad_names(p: _Prepared, h) -> dict:
    """``{grad-op output slot: [variable names]}``: ``<forward input>@GRAD``, or the temporary's
    name."""
    return {slot: [fslot if kind == TEMP else _desc(h.inputs[fslot][i]).name + GRAD_SUFFIX
                   for kind, fslot, i, _ in bound]
            for slot, _, bound in p.outs}
