"""The walkers of ``tape.lazy_replay``: per graph signature, the check that a backward's graph
is the one a cached program was made for, written out as one Python function.

A walker is written from the first graph of a signature (``write_walker``) and fetches each
op of the loss's graph from the op that reads it, op by op in descending record position (a
reader is recorded after what it reads, so each op is fetched before its own inputs are
read). Per op, it reads its inputs once: a ref (an output of an op) is checked to lead to the
op recorded at the same position on this tape, at the same output slot and index where the
producer has several outputs, and to be the very ref object every other reader of that output
in the first graph holds; a given array, and the handle entry beside it (where backward files
its gradient), to be the same object as the first of its set in the first graph (the arrays,
and the entries, that were one object there: 16 sequences gather ~2,000 arrays, ~40 of them
distinct). So the state's pattern (``lazy_replay._pattern``) is read off those firsts alone,
and the walker keeps no local per array: the lines a first graph's 2,000 arrays and entries
cost are one comparison each.

A graph whose arrays or entries are shared otherwise than the first graph's (a leaf shared
differently) is not refused for that: the walker returns ``NOT_ALIKE`` and its *full* form,
written on the first such graph, gathers every array and entry for the whole pattern, with
the same checks of the ops and refs. Both return None for another graph: a ref of another
output or read by other readers, an op at another position or of another tape, a given array
now a ref or the other way round, an op that ran.
"""
from __future__ import annotations

import operator
import sys
import zlib

import numpy as np

from .batched_grads import entry_position
from .pending import LazyOp

NOT_ALIKE = object()    # the walker's answer for a graph whose arrays or entries are
# shared otherwise than its first graph's: its full form tells


class Walker:
    """One signature's walker. ``walk(loss_op, handles, records)`` -> ``(ops, arrays,
    entries, counts)``: the graph's ops in the walker's order (``positions``, their record
    positions), its given arrays, the handle entries beside them and the reference counts
    (``_source``); where alike, of ``arrays`` and ``entries`` only the first of each set, the
    arrays' numbered first (the places ``UnitSchedule`` names arrays by), and ``arrays`` and
    ``entries`` (``pick(firsts) -> tuple``) expand them into every place; else ``NOT_ALIKE``
    or None. ``walk_full``: the same with every array and entry, or None."""

    __slots__ = ("walk", "positions", "arrays", "entries", "_full")

    def __init__(self, walk, positions: tuple, arrays, entries, full: bytes):
        self.walk = walk
        self.positions = positions
        self.arrays = arrays
        self.entries = entries
        # the full form's source, compressed (16 sequences: 477 KB, 71 KB so), until asked for
        self._full = full

    def walk_full(self, loss_op, handles: list, records: list):
        """``(ops, arrays, entries, counts)`` with every array and entry, or None."""
        full = self._full
        if type(full) is bytes:
            full = self._full = _compiled(zlib.decompress(full).decode())
        return full(loss_op, handles, records)


def write_walker(loss_op, records: list, handles: list):
    """The ``Walker`` of the graph of ``loss_op`` as recorded on ``records`` (with
    ``handles``), or None where the graph has an op off the tape, one that ran, or an input
    of a kind a program does not gather."""
    inputs = _read_graph(loss_op, records)
    if inputs is None:
        return None
    positions = sorted(inputs, reverse=True)
    # the leaves in the order the walker reads them, so the first of each set is read first
    read = [(p, slot, max(i, 0), x) for p in positions for slot, i, x in inputs[p][1]
            if type(x) is not tuple]
    entries = [entry_position(inputs[p][0].plan, 0, slot, i) for p, slot, i, _ in read]
    array_first = [first for _, first in _firsts([x for *_, x in read])]
    entry_first = [first for _, first in _firsts([handles[p].entries[n] for (p, *_), n
                                                 in zip(read, entries)])]
    # (the gathered arrays numbered firsts first: a place of a first is the same in both)
    order = sorted(range(len(read)), key=lambda e: array_first[e] != e)
    number = [0] * len(read)
    for k, e in enumerate(order):
        number[e] = k
    leaves = [(number[e], entries[e], number[array_first[e]], entry_first[e])
              for e in range(len(read))]
    sources = [_source(loss_op.record[1], positions, inputs, leaves, alike)
               for alike in (True, False)]
    entry_firsts = sorted(set(entry_first))
    arrays = _picker([number[array_first[e]] for e in order])
    entries = _picker([entry_firsts.index(entry_first[e]) for e in order])
    return Walker(_compiled(sources[0]), tuple(positions), arrays, entries,
                  zlib.compress(sources[1].encode()))


def _read_graph(loss_op, records):
    """``{position: (op, [(slot, index or -1, (position, output, index) of a ref or a given
    array)...])}`` of the graph of ``loss_op``, or None (``write_walker``)."""
    inputs = {loss_op.record[1]: (loss_op, [])}
    stack = [loss_op]
    while stack:
        op = stack.pop()
        if type(op) is not LazyOp or op.results is not None or op.record is None or \
                op.record[0] is not records:
            return None
        places = inputs[op.record[1]][1]
        for slot, a in op.args.items():
            listed = type(a) is list
            for i, x in enumerate(a) if listed else ((-1, a),):
                t = type(x)
                if t is tuple:
                    producer = x[0]
                    record = producer.record
                    if record is None or record[0] is not records or \
                            type(producer) is not LazyOp:
                        return None
                    places.append((slot, i, (record[1], x[1], x[2])))
                    if record[1] not in inputs:
                        inputs[record[1]] = (producer, [])
                        stack.append(producer)
                elif t is np.ndarray:
                    places.append((slot, i, x))
                elif x is not None:
                    return None
    return inputs


def _source(loss_position: int, positions: list, inputs: dict, leaves: list, alike: bool):
    """The walker's source and constants, alike or full (``Walker``): ``leaves``, per leaf as
    it reads them, ``(number, its handle entry's place, the number of the first of its
    set of arrays, the leaf (as read) first of its set of entries)``."""
    lines = [f"def walk(o{loss_position}, hs, records):", "    try:",
             f"        if o{loss_position}.results is not None:", "            return None"]
    refs = {}           # (position, output, index) -> the ref's local
    fetched = {loss_position}
    read = 0            # leaves read
    for p in positions:
        places = inputs[p][1]
        if not places:
            continue
        mine = read
        args = f"o{p}.args"
        if len(places) > 1:
            lines.append(f"        a = {args}")
            args = "a"
        for slot, i, what in places:
            where = f"{args}[{slot!r}]" + (f"[{i}]" if i >= 0 else "")
            if type(what) is not tuple:
                k, _, first, _ = leaves[read]
                read += 1
                if alike and first != k:
                    lines += [f"        if {where} is not l{first}:",
                              "            return NOT_ALIKE"]
                else:
                    lines.append(f"        l{k} = {where}")
                continue
            q, n, j = what
            ref = refs.get(what)
            if ref is not None:
                lines += [f"        if {where} is not {ref}:", "            return None"]
                continue
            ref = refs[what] = f"r{len(refs)}"
            lines.append(f"        {ref} = {where}")
            if q in fetched:
                checks = [f"{ref}[0] is not o{q}"]
            else:   # (a given array there instead: it has no op's record, an AttributeError)
                fetched.add(q)
                lines.append(f"        o{q} = {ref}[0]")
                checks = [f"(c := o{q}.record)[1] != {q} or c[0] is not records or "
                          f"o{q}.results is not None"]  # (results: it ran)
            outputs = inputs[q][0].plan.outputs
            if len(outputs) > 1 or outputs[0][1]:   # (one output: every ref is (op, 0, -1))
                checks.append(f"{ref}[1] != {n} or {ref}[2] != {j}")
            lines += [f"        if {' or '.join(checks)}:", "            return None"]
        lines += _entry_lines(p, range(mine, read), leaves, alike)
    kept = sorted(k for k, _, first, _ in leaves if not alike or first == k)
    if kept:    # (each still an array: where alike, the firsts of the sets tell)
        lines += [f"        if {' or '.join(f'type(l{k}) is not ndarray' for k in kept)}:",
                  "            return None"]
    lines += ["    except (TypeError, KeyError, IndexError, AttributeError):   # (an op ran, its "
              "args gone; or another graph)",
              "        return None",
              f"    ops = [{''.join(f'o{p}, ' for p in positions)}]",
              # (counted in C: a tuple of them holds each once more, in every state alike)
              f"    counts = tuple(map(getrefcount, ({''.join(f'{r}, ' for r in refs.values())}"
              "*ops)))"]
    entry_kept = [e for e, (_, _, _, first) in enumerate(leaves) if first == e] if alike \
        else [e for _, e in sorted((k, e) for e, (k, *_) in enumerate(leaves))]
    lines.append(f"    return ops, ({''.join(f'l{k}, ' for k in kept)}), "
                 f"({''.join(f'e{e}, ' for e in entry_kept)}), counts")
    return "\n".join(lines)


def _entry_lines(p: int, mine: range, leaves: list, alike: bool) -> list:
    """The handle entries beside the leaves ``mine`` (as read) of the op at position ``p``,
    each kept as ``e<leaf as read>`` or, alike, checked to be the first of its set."""
    if not mine:
        return []
    lines = [f"        h = hs[{p}].entries"] if len(mine) > 1 else []
    held = "h" if len(mine) > 1 else f"hs[{p}].entries"
    for e in mine:
        _, n, _, first = leaves[e]
        if alike and first != e:
            lines += [f"        if {held}[{n}] is not e{first}:", "            return NOT_ALIKE"]
        else:
            lines.append(f"        e{e} = {held}[{n}]")
    return lines


def _compiled(source: str):
    """The walker ``source`` defines."""
    namespace = {"getrefcount": sys.getrefcount, "ndarray": np.ndarray, "NOT_ALIKE": NOT_ALIKE}
    exec(compile(source, "<lazy replay walker>", "exec"), namespace)
    return namespace["walk"]


def _firsts(items: list) -> list:
    """``(k, the place of the first item that is the same object as item k)`` per item."""
    first = {}
    return [(k, first.setdefault(id(x), k)) for k, x in enumerate(items)]


def _picker(places: list):
    """``pick(items) -> tuple`` of the items at ``places``."""
    if not places:
        return lambda items: ()
    get = operator.itemgetter(*places)
    return get if len(places) > 1 else lambda items: (get(items),)
