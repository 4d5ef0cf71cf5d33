"""The batched backward of a cached unit schedule, written out as one function.

On a unit schedule (``tape.unit_schedule``) the graph the walker checked fixes everything
``batched_backward.run_batched_backward`` decides per unit: which handles each unit takes,
which grad steps run on which of its arrays, which output gradients arrived (or are zeros),
where each input gradient goes (an earlier unit's rows, by the placement or route the
schedule's first run kept; a leaf's gradient, by a handle entry's position) and whether it is
the first, second or a later part of its sum. Once that first run has kept the layout,
placements and routes, the next run writes the backward out (as ``lazy_replay``'s walker and
``lazy_program``'s programs are: ``compile`` of generated lines, constants bound in the
function's namespace), straight-line per unit: the grad kernel calls, the adds into locals
that stand for the units' gradients and the leaves', and the unit's release, with its locals
dropped first so that each value goes when it went before. It runs from then on.

The same kernels run on the same arrays in the same order and the same sums are made in the
same order, so results are bit for bit those of ``run_batched_backward``. The loss's seed
goes in by ``batched_grads.add_rows`` as before. Not written (that path stays), though the
walker's checks leave no such graph: one whose first cached run did not keep where a
gradient goes, or that files one by variable to a value no unit of the run made
(``batched_grads.take_filed``).

Callgrind, a whole training step of ``benchmarks/lazy_steps.py`` (``PYTHONHASHSEED=0``):
``lm_16_fn`` 74.4 M -> 71.6 M instructions, ``forest_fn`` 67.5 M -> 65.5 M, ``lm_16``
76.3 M -> 73.6 M. Most of what is left of the backward's Python is freeing the step's graph:
the ~600 handles (``handles.clear()``, about 0.5 ms of CPU for ``lm_16_fn``) and each unit's
arrays at its release.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .backward import set_grad
from .batch_rules import SHARED
from .batched_backward import joined, unit_program
from .batched_grads import (
    ADD_AT,
    AT,
    BLOCKS,
    OP_RUN,
    SUMMED,
    add_rows,
    entry_position,
    total_rows,
    whole_spec,
)
from .code_constants import CodeConstants
from .grad_replay import shape_only
from .grad_steps import FWD_IN, FWD_OUT, META_OUT, OPT_OUT_GRAD, OUT_GRAD, TEMP
from .variable import Variable


class _Refused(Exception):
    """The graph does something the written backward does not (the module's docstring)."""


def write_backward(layout, handles: list, records: list, loss):
    """``backward(handles, records, invoke, release)``: the batched backward of this graph
    (``layout``, a ``unit_schedule.HandleLayout`` its first cached run filled), written out
    from this run's units; None where it is not written (the module's docstring)."""
    units = []
    seed = layout.units(handles, records, units)
    try:
        return _Writer(handles, units, layout).write(seed, loss, layout.order)
    except _Refused:
        return None


def _fit(g, shape):
    """``g`` as a gradient of a variable of ``shape`` (a block of a stacked batch's
    gradient, reshaped: ``batched_grads._file_by_variable``)."""
    return g if g.shape == shape else g.reshape(shape)



class _Writer(CodeConstants):
    """The lines of one written backward, and what the walk over its units knows so far:
    which output gradients (``(unit place, output index, index)``) and leaf gradients have a
    part yet and whether their sum is owned, and which rows of each unit a gradient
    reached."""

    def __init__(self, handles: list, units: list, layout):
        self.units = units
        self.at = {id(unit): n for n, unit in enumerate(units)}
        self.where = {id(h): p for p, h in enumerate(handles)}
        self.kept = layout.kept
        self.lines = ["def backward(handles, records, invoke, release):"]
        super().__init__({"add_rows": add_rows, "joined": joined, "fit": _fit,
                          "set_grad": set_grad, "add_at": np.add.at})
        self.grads = {}     # (unit place, k, j) -> owned
        self.reached = {}   # unit place -> rows a gradient reached
        self.leaves = {}    # leaf VarDesc -> (its number, owned)
        self.scratch = set()    # locals of the unit being written, dropped before its release

    def write(self, seed: tuple, loss, order: list):
        """The written function, from the units' seed (``batched_backward._seed``), the loss
        and the units' first record positions (``order``)."""
        unit, k, j, row = seed
        out = self.lines
        out += [f"    u{n} = records[{first}]" for n, (first, _) in enumerate(order)]
        out += ["    records.clear()", "    try:"]
        d = loss.desc
        ones = self.constant(loss.place.array_module().ones)
        s = self.at[id(unit)]
        out.append(f"        add_rows(u{s}, {k}, {j}, [{row}], {ones}({self.constant(d.shape)}, "
                   f"{self.constant(dtypes.to_numpy(d.dtype))}))")
        out.append(f"        {self.grad_name(s, k, j)} = u{s}.grads[{(k, j)!r}][0]")
        self.grads[(s, k, j)] = unit.size > 1   # (a batch's row: added into zeros, owned)
        self.reached[s] = {row}
        for n, unit in enumerate(self.units):
            if n in self.reached:
                self.unit_backward(n, unit)
            dropped = sorted(self.scratch) + [self.grad_name(*key) for key in self.grads
                                              if key[0] == n]
            if dropped:
                out.append(f"        del {', '.join(dropped)}")
            self.scratch.clear()
            out.append(f"        release(u{n})")
        out += ["        handles.clear()", "    except BaseException:", "        handles.clear()"]
        out += [f"        release(u{n})" for n in range(len(self.units))]
        out.append("        raise")
        out += [f"    set_grad(v{number}, l{number})" for number, _ in self.leaves.values()]
        exec(compile("\n".join(out), "<batched backward of a unit schedule>", "exec"),
             self.namespace)
        return self.namespace["backward"]

    @staticmethod
    def grad_name(n: int, k: int, j: int) -> str:
        return f"g{n}_{k}" if j < 0 else f"g{n}_{k}_{j}"

    def entry(self, h, which: int, slot: str, i: int) -> str:
        """The code of handle ``h``'s entry for input (``which`` 0) or output ``slot[i]``."""
        return (f"handles[{self.where[id(h)]}].entries"
                f"[{entry_position(h.plan, which, slot, i)}]")

    def unit_backward(self, n: int, unit) -> None:
        """``batched_backward._unit_backward`` of unit ``n``, written out."""
        out = self.lines
        h0 = next(h for h in unit.handles if h is not None)
        temps = {}
        for p, ins, outs in unit_program(unit.plan, h0):
            args = []
            for slot, duplicable, bound in ins:
                if duplicable:
                    values = [self.argument(n, unit, h0, b, temps) for b in bound]
                    value = f"[{', '.join(v for v in values if v is not None)}]"
                else:
                    value = self.argument(n, unit, h0, bound[0], temps)
                args.append(f"{slot!r}: {value}")
            out.append(f"        r = invoke({self.constant(p.plan)}, {{{', '.join(args)}}}, "
                       f"{self.constant(p.wants)}, None)")
            self.scratch.add("r")
            for m, duplicable, targets in outs:
                for j, kind, key in targets:
                    g = f"r[{m}][{j}]" if duplicable else f"r[{m}]"
                    if kind == TEMP:
                        name = temps[key] = f"t{len(temps)}"
                        self.scratch.add(name)
                        out.append(f"        {name} = {g}")
                    else:
                        self.file(n, unit, key, g)

    def argument(self, n: int, unit, h0, binding: tuple, temps: dict):
        """``batched_backward._argument``'s value as code (None: an optional gradient that
        never arrived)."""
        kind, fslot, i, k, j = binding
        if kind == OUT_GRAD or kind == OPT_OUT_GRAD:
            if (n, k, j) in self.grads:
                return self.grad_name(n, k, j)
            if kind == OPT_OUT_GRAD:
                return None
            shape, dtype = whole_spec(unit, k, j)
            zeros = self.constant(unit.plan.place.array_module().zeros)
            return f"{zeros}({self.constant(shape)}, {self.constant(dtypes.to_numpy(dtype))})"
        if kind == FWD_IN and unit.arrays is not None:
            listed = type(unit.arrays[fslot]) is list
            return f"u{n}.arrays[{fslot!r}]" + (f"[{i}]" if listed else "")
        if kind == FWD_OUT and unit.results is not None:
            return f"u{n}.results[{k}]" + (f"[{j}]" if j >= 0 else "")
        if kind == FWD_IN or kind == FWD_OUT:
            which = 0 if kind == FWD_IN else 1
            entries = ", ".join(self.entry(h, which, fslot, i) for h in unit.handles)
            return f"joined(u{n}, [{entries}])"
        if kind == TEMP:
            return temps[fslot]
        which = 1 if kind == META_OUT else 0
        e = h0.entries[entry_position(h0.plan, which, fslot, i)]
        d = e.desc if type(e) is Variable else e
        shape = d.shape
        if unit.size > 1 and not (which == 0 and unit.ins and unit.ins.get(fslot) == SHARED):
            shape = (unit.size,) + tuple(shape) if unit.stacked else \
                (total_rows(unit, shape[0]),) + tuple(shape[1:])
        return self.constant(shape_only(tuple(shape), d.dtype))

    def file(self, n: int, unit, key: tuple, g: str) -> None:
        """``batched_grads.file_gradient`` of unit ``n``'s input ``key``, gradient ``g``
        (code), written out."""
        out = self.lines
        pieces = unit.sources[key]
        if len(pieces) == 1:
            found = self.kept[n].get(key)
            if found is None:
                raise _Refused
            piece = pieces[0]
            if piece[0] is not None:
                self.add_placed(piece, found, g)
            else:   # (the variable every op shares: its entry's position kept)
                self.file_by_variable(next(h for h in unit.handles if h is not None), found, g)
            return
        route = None if unit.filings is None else unit.filings.get(key)
        if route is None:
            raise _Refused
        targets, singles = route
        out.append(f"        g = {g}")
        self.scratch.add("g")
        reached = self.reached.get(n, ())
        for row, rows in singles:
            h = unit.handles[row]
            if row in reached and h is not None:
                position = entry_position(h.plan, 0, *key)
                self.file_by_variable(h, position, f"g[{self.constant(rows)}]")
        for at, place, part in targets:
            self.add_placed(pieces[at], place, f"g[{self.constant(part)}]")

    def file_by_variable(self, h, position: int, g: str) -> None:
        """``batched_grads._file_by_variable`` of handle ``h``'s entry at ``position`` (an
        input's), written out: a leaf's gradient, a local summed in order."""
        e = h.entries[position]
        if type(e) is not Variable or e._tape != 0:
            raise _Refused      # (a value an earlier execution computed: ``take_filed``)
        d = e.desc
        g = f"fit({g}, {self.constant(d.shape)})"
        found = self.leaves.get(d)
        if found is None:
            number = len(self.leaves)
            self.lines += [f"        v{number} = handles[{self.where[id(h)]}].entries[{position}]",
                           f"        l{number} = {g}"]
            self.leaves[d] = (number, False)
            return
        number, owned = found
        self.lines.append(f"        l{number} += {g}" if owned else
                          f"        l{number} = l{number} + {g}")
        self.leaves[d] = (number, True)

    def add_placed(self, piece: tuple, place: tuple, g: str) -> None:
        """``batched_grads.add_placed`` of gradient ``g`` (code) into the rows of ``piece``'s
        unit's output by ``place``, written out on the locals of that unit's gradients."""
        source, k, j = piece[0], piece[1], piece[2]
        m = self.at.get(id(source))
        if m is None:
            raise _Refused
        rows, how, index, shape = place
        self.reached.setdefault(m, set()).update(rows)
        name = self.grad_name(m, k, j)
        owned = self.grads.get((m, k, j))
        out = self.lines
        if how <= SUMMED:
            if how == SUMMED:
                g = f"{g}.reshape({self.constant(index)}).sum(axis=0)"
            if shape is not None:
                g = f"{g}.reshape({self.constant(shape)})"
            out.append(f"        {name} = {g}" if owned is None else
                       f"        {name} += {g}" if owned else
                       f"        {name} = {name} + {g}")
            self.grads[(m, k, j)] = owned is not None
            return
        whole, dtype = whole_spec(source, k, j)
        if owned is None:
            zeros = self.constant(source.plan.place.array_module().zeros)
            out.append(f"        {name} = {zeros}({self.constant(whole)}, "
                       f"{self.constant(dtypes.to_numpy(dtype))})")
        elif not owned:
            out.append(f"        {name} = {name}.copy()")
        self.grads[(m, k, j)] = True
        index = self.constant(index) if how != OP_RUN else None
        if how <= ADD_AT:
            if shape:
                g = f"{g}.reshape({self.constant((-1,) + tuple(whole[1:]))})"
            out.append(f"        {name}[{index}] += {g}" if how == AT else
                       f"        add_at({name}, {index}, {g})")
        elif how == OP_RUN:
            first, count = place[2]
            per_op = whole[0] // source.size
            rows = self.constant(slice(first * per_op, (first + count) * per_op))
            out.append(f"        {name}[{rows}] += {g}")
        else:
            blocks = f"{name}.reshape({self.constant((source.size, -1))})"
            g = f"{g}.reshape({self.constant(shape)})"
            out.append(f"        {blocks}[{index}] += {g}" if how == BLOCKS else
                       f"        add_at({blocks}, {index}, {g})")

