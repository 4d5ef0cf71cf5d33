"""A traced function's Program written out as straight code, once per Program: what its op's
kernel and grad kernel run (``tape.function_program``).

``forward(inputs)`` binds every value of the graph to a local (``v<i>``) and calls each traced
op's kernel on them, directly (``plan.direct``), or through ``invoke`` while a check is on, as
the eager runners do; it returns every value. ``backward(values, out_grads)`` runs the traced
ops' grad steps in reverse (``grad_replay.prepare``, which reads them through
``tape.grad_steps``) for the ops an output gradient reaches, keeping each value's gradient in a
local (``g<i>``): the first part as it is, a later one added out of place, in the order eager
backward adds them (a kernel's array may be shared, so none is written). Zeros stand in for the
gradient of an op's output that none reached.
"""
from __future__ import annotations

import re

from . import dtypes
from . import flags as _flags
from .dispatch import invoke
from .grad_replay import prepare, shape_only
from .grad_steps import FWD_IN, FWD_OUT, IN_GRAD, META_IN, META_OUT, OUT_GRAD, TEMP

_NOT_A_NAME = re.compile(r"\W")


def write_forward(program):
    """``forward(inputs) -> [every value]`` of ``program``."""
    graph = program.graph
    names = _names(graph.size)
    lines = ["def forward(inputs):", f"    {_unpacked(names[:graph.inputs])} = inputs"]
    namespace = {"invoke": invoke, "flags": _flags}
    for n, (step, plan) in enumerate(zip(graph.steps, program.plans)):
        namespace.update({f"p{n}": plan, f"d{n}": plan.direct, f"a{n}": plan.attrs})
        given = {slot: _listed(names, index) if dup else names[index[0]]
                 for slot, dup, index in step.ins if index}
        lines += _call_lines(f"p{n}", f"d{n}({_arguments(f'a{n}', 'None', plan.info, given)})",
                             given, "None", len(plan.info.outputs) == 1)
        for m, (_, duplicable, index) in enumerate(step.outs):
            if index:
                r = "r" if len(step.outs) == 1 else f"r[{m}]"
                lines.append(f"    {_unpacked(names[i] for i in index)} = {r}" if duplicable
                             else f"    {names[index[0]]} = {r}")
    lines.append(f"    return [{', '.join(names)}]")
    return _compiled(lines, namespace, "forward")


def write_backward(program):
    """``backward(values, out_grads) -> [each input's gradient or None]`` of ``program``."""
    return _Backward(program).written()


class _Backward:
    """The lines and namespace of a Program's ``backward``: the values' locals ``v<i>``, their
    gradients' ``g<i>``."""

    def __init__(self, program):
        self.program = program
        self.values = _names(program.graph.size)
        self.grads = _names(program.graph.size, "g")
        self.namespace = {"invoke": invoke, "flags": _flags, "zeros": _zeros}

    def written(self):
        graph, grads = self.program.graph, self.grads
        lines = ["def backward(values, out_grads):", f"    {_unpacked(self.values)} = values",
                 *(f"    {g} = None" for g in grads)]
        for k, i in enumerate(graph.outputs):
            lines += _sum_lines(grads[i], f"out_grads[{k}]", "    ")
        for n in range(len(graph.steps) - 1, -1, -1):
            step = graph.steps[n]
            outs = [i for _, _, index in step.outs for i in index]
            prepared = prepare(self.program.plans[n], self.program.counts[n]) if outs else ()
            if not prepared:
                continue
            lines.append(f"    if {' or '.join(f'{grads[i]} is not None' for i in outs)}:")
            slots = ({slot: index for slot, _, index in step.ins},
                     {slot: index for slot, _, index in step.outs})
            for m, p in enumerate(prepared):
                lines += self.step_lines(p, f"{n}_{m}", slots)
            lines += [f"        {grads[i]} = None" for i in outs]
        lines.append(f"    return [{', '.join(grads[:graph.inputs])}]")
        return _compiled(lines, self.namespace, "backward")

    def step_lines(self, p, name: str, slots: tuple) -> list:
        """The lines of prepared grad step ``p`` of a traced op whose input and output slots
        bind the values ``slots`` gives: its call, and its gradients added or kept."""
        self.namespace.update({f"p{name}": p.plan, f"d{name}": p.plan.direct,
                               f"a{name}": p.plan.attrs, f"w{name}": p.wants})
        given = {slot: (f"[v for v in ({', '.join(self.bound(*ref, slots) for ref in refs)},) "
                        "if v is not None]") if duplicable else self.bound(*refs[0], slots)
                 for slot, duplicable, refs in p.ins if refs}
        call = f"d{name}({_arguments(f'a{name}', f'w{name}', p.plan.info, given)})"
        lines = ["    " + line for line in
                 _call_lines(f"p{name}", call, given, f"w{name}", len(p.outs) == 1)]
        for j, (slot, duplicable, refs) in enumerate(p.outs):
            if slot not in p.wants:
                continue
            r = "r" if len(p.outs) == 1 else f"r[{j}]"
            for e, (kind, fslot, i, kept) in enumerate(refs):
                if not kept:
                    continue
                part = f"({r}[{e}] if {r} is not None else None)" if duplicable else r
                if kind == TEMP:
                    lines.append(f"        {self.bound(kind, fslot, i, slots)} = {part}")
                else:
                    lines += _sum_lines(self.grads[slots[0][fslot][i]], part, "        ")
        return lines

    def bound(self, kind: int, fslot: str, i: int, slots: tuple) -> str:
        """The expression of a grad-op input bound as ``(kind, fslot, i)``."""
        if kind == TEMP:
            return "t_" + _NOT_A_NAME.sub("_", fslot)
        at = slots[0 if kind in (FWD_IN, META_IN, IN_GRAD) else 1][fslot][i]
        if kind in (FWD_IN, FWD_OUT):
            return self.values[at]
        if kind in (META_IN, META_OUT):
            self.namespace[f"s{at}"] = shape_only(*self.program.specs[at])
            return f"s{at}"
        g = self.grads[at]
        if kind == OUT_GRAD:
            self.namespace[f"z{at}"] = (self.program.graph.place, *self.program.specs[at])
            return f"({g} if {g} is not None else zeros(z{at}))"
        return g     # (an optional output gradient or an input's: None if none arrived)


def _call_lines(plan: str, call: str, given: dict, wants: str, single: bool) -> list:
    """Lines binding ``r``, the kernel's result: ``call`` (its direct call), or ``invoke``
    on ``plan`` while a check is on (``invoke`` gives one entry per output slot)."""
    arrays = ", ".join(f"{slot!r}: {value}" for slot, value in given.items())
    return ["    if flags.checking:",
            f"        r = invoke({plan}, {{{arrays}}}, {wants})" + ("[0]" if single else ""),
            "    else:",
            f"        r = {call}"]


def _arguments(attrs: str, wants: str, info, given: dict) -> str:
    """A direct call's arguments: the attributes, ``wants``, one array (or list, or None) per
    input slot of ``info`` in slot order."""
    return ", ".join([attrs, wants, *(given.get(s.name, "None") for s in info.inputs)])


def _sum_lines(g: str, part: str, indent: str) -> list:
    return [f"{indent}x = {part}",
            f"{indent}if x is not None:",
            f"{indent}    {g} = x if {g} is None else {g} + x"]


def _names(n: int, prefix: str = "v") -> list:
    return [f"{prefix}{i}" for i in range(n)]


def _unpacked(names) -> str:
    names = list(names)
    return f"{names[0]}," if len(names) == 1 else ", ".join(names)


def _listed(names: list, index) -> str:
    return f"[{', '.join(names[i] for i in index)}]"


def _zeros(spec: tuple):
    place, shape, dtype = spec
    return place.array_module().zeros(shape, dtypes.to_numpy(dtype))


def _compiled(lines: list, namespace: dict, name: str):
    exec(compile("\n".join(lines), f"<{name} of a traced function>", "exec"), namespace)
    return namespace[name]
