"""``memory_report``: the values a tape keeps alive for backward, op by op, in bytes."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .grad_replay import grad_op_types
from .tape import get_global_tape
from .variable import Variable


class MemoryRow(NamedTuple):
    """One recorded op: what it keeps and for which grad ops."""

    index: int          # position on the tape (0 = recorded first)
    op_type: str
    grad_ops: tuple     # the grad op types backward will run for it
    kept: tuple         # ((slot, variable name), ...) of the Variables the op holds; a name
    #                     ends in " (leaf)" for a leaf held only to receive its gradient
    bytes: int          # bytes of the arrays this op is the first on the tape to hold


class MemoryReport:
    """``rows`` (a MemoryRow per recorded op, in tape order) and ``total_bytes``; ``str()`` is a
    table."""

    def __init__(self, rows: list, arrays: int):
        self.rows = rows
        self.arrays = arrays
        self.total_bytes = sum(r.bytes for r in rows)

    def __str__(self):
        header = ("#", "op", "grad op", "keeps", "bytes")
        cells = [(str(r.index), r.op_type, ", ".join(r.grad_ops) or "-",
                  ", ".join(f"{slot}={name}" for slot, name in r.kept) or "-", human(r.bytes))
                 for r in self.rows]
        widths = [max(len(c) for c in column) for column in zip(header, *cells)]
        lines = ["  ".join(c.rjust(w) if i in (0, 4) else c.ljust(w)
                           for i, (c, w) in enumerate(zip(row, widths))).rstrip()
                 for row in (header, *cells)]
        lines.append(f"total: {human(self.total_bytes)} in {self.arrays} array(s), held by "
                     f"{len(self.rows)} recorded op(s)")
        return "\n".join(lines)

    def __repr__(self):
        return f"<MemoryReport: {len(self.rows)} ops, {human(self.total_bytes)}>"


def human(n: int) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _buffer(value):
    """The array that owns ``value``'s memory (a view keeps its whole base alive)."""
    while isinstance(getattr(value, "base", None), np.ndarray):
        value = value.base
    return value


def memory_report(tape=None) -> MemoryReport:
    """What ``tape`` (default: this thread's global tape) holds right now: per recorded op, the
    Variables it keeps (the forward values its grad ops read, and leaves that will receive a
    gradient) and the bytes of their arrays, each array counted once, under the first op that
    holds it; a view counts as its whole base. A spent tape (after backward) holds nothing.

    >>> layer = tape.layers.Linear(64, 128, act="relu")
    >>> loss = tape.ops.mean(layer(tape.Variable(np.ones((32, 64), np.float32), name="x")))
    >>> print(tape.memory_report())
    #  op               grad op               keeps                     bytes
    0  mul              mul_grad              X=x, Y=linear_0.w_0    40.0 KiB
    1  elementwise_add  elementwise_add_grad  Y=linear_0.b_0 (leaf)     512 B
    2  relu             relu_grad             Out=tmp_2              16.0 KiB
    3  mean             mean_grad             -                           0 B
    total: 56.5 KiB in 4 array(s), held by 4 recorded op(s)
    """
    if tape is None:
        tape = get_global_tape()
    seen = set()
    rows = []
    for index, h in enumerate(tape):
        kept, size = [], 0
        reads = h.info.grad.keeps if h.info.grad is not None else ()
        for slots in (h.inputs, h.outputs):
            for slot, entries in slots.items():
                for e in entries:
                    if type(e) is not Variable:
                        continue
                    leaf = e.is_leaf and slot not in reads
                    kept.append((slot, e.name + (" (leaf)" if leaf else "")))
                    buffer = _buffer(e._value)
                    if buffer is not None and id(buffer) not in seen:
                        seen.add(id(buffer))
                        size += getattr(buffer, "nbytes", 0)
        rows.append(MemoryRow(index, h.type, tuple(grad_op_types(h)), tuple(kept), size))
    return MemoryReport(rows, len(seen))
