"""Graph pictures, as the dynamic-graph design draws them: the forward tape and the backward tape
as clusters of record-shaped op nodes (type, input slots, output slots), Variables as nodes, and
a dashed ``Grad()`` edge from each parameter to its gradient.

``tape.visualize(loss)`` draws the global tape with the backward of ``loss``;
``tape.static.to_dot(tape, loss)`` any tape; ``program_to_dot(program)`` a static program
(``Program.to_dot()``). They live in static mode because the backward they draw is static
``append_backward``'s.
"""
from __future__ import annotations

import copy
import pathlib
import shutil
import subprocess

from ..desc import OpDesc, ProgramDesc
from ..registry import grad_name
from ..tape import Tape, get_global_tape
from .backward import append_backward

_CLUSTERS = (("forward tape", lambda role: not role & 3), ("backward tape", lambda role: role & 1),
             ("optimizer", lambda role: role & 2))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _record(text: str) -> str:
    """``text`` escaped for a record label."""
    return "".join("\\" + c if c in '{}|<>" ' else c for c in text)


def _slots(title: str, slots: dict, prefix: str) -> str:
    fields = "|".join(f"<{prefix}{i}>{_record(slot)}: {_record(', '.join(names))}"
                      for i, (slot, names) in enumerate(slots.items()))
    return f"{{{title}|{{{fields}}}}}" if fields else title


def program_to_dot(program, name: str = "G") -> str:
    """The Graphviz source of block 0 of ``program`` (a Program or ProgramDesc): ops by role in
    the clusters "forward tape", "backward tape" and "optimizer"; each op a record with its
    slots, an edge from each input slot's port to the Variable and from each output slot's port;
    parameters (persistable, stop_gradient=False) in a cluster "parameters", with a dashed
    ``Grad()`` edge to their gradient where the program has it."""
    block = getattr(program, "desc", program).global_block()
    lines = [f"digraph {name} {{", "  rankdir=TB;", "  node [fontsize=10];"]
    edges, used = [], {}
    for c, (title, member) in enumerate(_CLUSTERS):
        ops = [(i, op) for i, op in enumerate(block.ops) if member(op.attrs.get("op_role", 0))]
        if not ops:
            continue
        lines += [f"  subgraph cluster_{c} {{", f"    label={_quote(title)};",
                  "    style=filled; color=lightgrey;", "    node [shape=record, style=filled, "
                  "fillcolor=white];"]
        for i, op in ops:
            label = (f"{{type: {_record(op.type)}|{_slots('input', op.inputs, 'i')}|"
                     f"{_slots('output', op.outputs, 'o')}}}")
            lines.append(f"    op_{i} [label={_quote(label)}];")
            for prefix, slots, forward in (("i", op.inputs, False), ("o", op.outputs, True)):
                for k, names in enumerate(slots.values()):
                    for var in names:
                        used[var] = None
                        edges.append(f"  op_{i}:{prefix}{k} -> {_quote(var)}" +
                                     ("" if forward else " [dir=back]") + ";")
        lines.append("  }")
    parameters = [n for n in used if n in block.vars and block.vars[n].persistable
                  and not block.vars[n].stop_gradient]
    if parameters:
        lines += ["  subgraph cluster_params {", '    label="parameters";',
                  *(f"    {_quote(n)} [shape=box];" for n in parameters), "  }"]
    lines += [f"  {_quote(n)} [shape=ellipse];" for n in used if n not in parameters]
    lines += edges
    lines += [f'  {_quote(n)} -> {_quote(grad_name(n))} [label="Grad()", style=dashed];'
              for n in parameters if grad_name(n) in used]
    return "\n".join(lines + ["}"]) + "\n"


def to_dot(tape: Tape, loss=None) -> str:
    """The Graphviz source of ``tape``'s recorded ops and, with ``loss`` (a Variable the tape
    computed), of their backward: the grad ops static ``append_backward`` makes, which are the
    ones ``loss.backward()`` runs. Draw before calling backward, which spends the tape."""
    desc = ProgramDesc()
    block = desc.global_block()
    for h in tape:
        slots = []
        for entries in (h.inputs, h.outputs):
            slots.append({})
            for slot, vs in entries.items():
                descs = [getattr(v, "desc", v) for v in vs]
                for d in descs:
                    block.add_var(copy.copy(d))
                slots[-1][slot] = [d.name for d in descs]
        block.append_op(OpDesc(h.type, *slots, dict(h.attrs)))
    if loss is not None:
        append_backward(desc, loss.name)
    return program_to_dot(desc)


def visualize(loss, path: str = "tape.dot", fmt: str = "svg") -> list[pathlib.Path]:
    """Draw the global tape and the backward of ``loss`` into ``path`` (a .dot file, always
    written) and, when Graphviz's ``dot`` is installed, into the same path with suffix ``fmt``
    (``svg`` or ``png``). Returns the files written. Call it before ``loss.backward()``.

    >>> loss = tape.ops.mean(model(x))
    >>> tape.visualize(loss, "build/mlp.dot")      # build/mlp.dot (+ build/mlp.svg)
    """
    dot_path = pathlib.Path(path)
    dot_path.parent.mkdir(parents=True, exist_ok=True)
    dot_path.write_text(to_dot(get_global_tape(), loss))
    written = [dot_path]
    if shutil.which("dot"):
        picture = dot_path.with_suffix("." + fmt)
        subprocess.run(["dot", f"-T{fmt}", str(dot_path), "-o", str(picture)], check=True,
                       capture_output=True)
        written.append(picture)
    return written
