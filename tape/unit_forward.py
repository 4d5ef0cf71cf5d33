"""The cached forward of a unit schedule, written out as one Python function.

A ``unit_schedule.UnitSchedule`` runs a graph's forward batches in the kept turns
(``batching.run_turns``): per batch, its inputs gathered by the recipes its first run found
(``batch_inputs.BatchRecipes``), one kernel call, its ``units.Unit`` made and filed. What
that path still decides per batch (which earlier batch each input's rows come from and how
they are taken, which rule slot is shared, how the unit's sources are laid out) the graph fixes:
the walker (``lazy_replay``) checked that this graph is the one the schedule was made for,
op by op, in the same state. So the first run by the recipes is watched (``run_and_write``)
and the whole forward written out from it (``_write``): straight-line code that, per batch,
takes its inputs from the earlier batches' results (locals of the function) and the graph's
given arrays (the walker's leaves), calls the kernel through ``batching.invoke`` (a stacked
batch's inputs as the blocks that run made, its stacked plan named), makes the unit, files it
at its first op's record and hands the ops the results; the units' sources, the other
records and the ops' ``unit`` only where the generic batched backward follows, the one that
reads them (``run_written``). A lone op runs as ``batching.run_one`` runs it, or where the
written backward follows, written out the same way (its inputs as ``arrays_of`` reads them).
Same kernels on the same arrays in the same order as ``run_turns``: results bit for bit.

A given array is named by the first of the walker's leaves that is the same object: which
leaves are one array is part of the state the schedule belongs to (``lazy_replay._pattern``),
so it holds in every run of this schedule. The function holds no value, op or unit: its
constants are plans, rules, row and place lists, offsets and the schedule's ``filings``.

Leaving out what only the generic backward reads, and writing stacked batches and lone ops
out (2026-11-29, against 3e5b806): the written forward's own Python, kernels stubbed by a
cache of their results, min of 60 steps, two alternating rounds, load ~6 on 2 cores,
``lm_16_fn`` 0.33 -> 0.22 ms a step, ``forest_fn`` 0.78 -> 0.58 ms; callgrind, a whole step
(``PYTHONHASHSEED=0``), ``lm_16_fn`` 68.97 M -> 67.84 M instructions and ``forest_fn``
61.21 M -> 60.62 M without the lone ops (which save ~0.15 M more on ``lm_16_fn`` within one
build: between builds callgrind moves by up to ~0.4 M with code not run per step).
"""
from __future__ import annotations

import weakref

import numpy as np

from . import batching
from .batch_inputs import BatchRecipes
from .batch_rules import SHARED, STACK, rule_of
from .code_constants import CodeConstants
from .pending import LazyOp
from .unit_gathers import Unwritable, in_op_order_code, rows_code
from .units import Unit

written = 0     # forwards a written function ran (tests check it serves)


def run_and_write(turns: list, recipes: list, filings: list, ops: list, leaves: tuple):
    """Run ``ops`` (the walker's, in its order) in ``turns`` by their ``recipes`` (all made
    by an earlier run), as ``batching.run_turns`` does, and return the forward written out
    from what this run found, or None where a batch is of a kind it does not take."""
    args = [op.args for op in ops]
    rules = [None if type(turn) is int else rule_of(ops[turn[0]]) for turn in turns]
    # (a lone op's place on its tape, which running it clears: ``units._place``)
    records = {turn: ops[turn].record for turn in turns if type(turn) is int}
    batching.run_turns(ops, turns, recipes, filings)
    try:
        return _write(turns, recipes, rules, ops, args, leaves, records)
    except Unwritable:
        return None


def run_written(forward, ops: list, leaves: tuple, records: list, generic: bool) -> None:
    """Run ``forward`` (``run_and_write``'s) over this run's ``ops`` and ``leaves`` (the
    walker's) and the tape's ``records``. ``generic``: the generic batched backward follows
    (``batched_backward.run_batched_backward``: the backward was not written), which reads
    each unit's ``sources`` and ``filings``, and a lone op's sources its inputs' units
    (``units._sources``, by each op's ``unit``); so a batch's unit and ops get them and
    every record of its ops the unit, as ``run_turns`` does. Otherwise none of it has a
    reader: the written backward takes each unit from its first record and where its
    gradients go from its own constants, and an execution that reads these ops later (of
    ops the loss does not need) finds no unit of a spent tape's ops either way (its
    records cleared: ``units.recorded``)."""
    global written
    try:
        forward(ops, leaves, records, batching.invoke, generic)
    except BaseException:
        batching._drop_args_of_ran(ops)
        raise
    written += 1


class _Writer(CodeConstants):
    """The lines and the namespace of one written forward."""

    def __init__(self, ops: list, args: list, leaves: tuple, turns: list):
        self.ops, self.args = ops, args
        self.place = {id(op): w for w, op in enumerate(ops)}
        self.turn_of = {}       # walker place -> its turn
        self.units = {}         # id(unit) -> its turn
        for t, turn in enumerate(turns):
            for w in (turn,) if type(turn) is int else turn:
                self.turn_of[w] = t
            unit = ops[turn if type(turn) is int else turn[0]].unit
            if unit is not None:
                self.units[id(unit())] = t
        self.leaf = {}
        for k, x in enumerate(leaves):
            self.leaf.setdefault(id(x), k)
        self.leaves_read = set()
        super().__init__({"Unit": Unit, "weakref_ref": weakref.ref,
                          "run_one": batching.run_one})

    def given(self, array) -> str:
        """The name of given array ``array`` (the first leaf that is it: the walker
        gathers every array given to an op of its graph)."""
        k = self.leaf[id(array)]
        self.leaves_read.add(k)
        return f"a{k}"

    def results(self, producer) -> str:
        """The name of the results of ``producer``'s turn."""
        return f"r{self.turn_of[self.place[id(producer)]]}"

    def output(self, producer, k: int, j: int) -> str:
        """The value of output ``k`` (index ``j``) of a lone op ``producer``."""
        if producer.batch is not None:
            raise Unwritable   # (a part of a batch's output: read cuts it out)
        return f"{self.results(producer)}[{k}]" + (f"[{j}]" if j >= 0 else "")

    def sources(self, unit) -> str:
        """``unit``'s sources, as this run made them, with this run's units."""
        if unit.sources is None:
            return "None"
        entries = []
        for key, pieces in unit.sources.items():
            written_pieces = []
            for piece in pieces:
                if piece[0] is None:
                    written_pieces.append(f"(None, {piece[1]})")
                    continue
                source, k, j, rows, places = piece
                t = self.units[id(source)]  # (made by this run: the walker's ops were pending)
                written_pieces.append(f"(u{t}, {k}, {j}, {self.constant(rows)}, "
                                      f"{self.constant(places)})")
            entries.append(f"{key!r}: [{', '.join(written_pieces)}]")
        return "{" + ", ".join(entries) + "}"


def _write(turns, recipes, rules, ops, args, leaves, records):
    """The forward of ``run_and_write``'s run, compiled (``args`` and ``rules``: each op's
    inputs and each batch's rule, as they were before it ran; ``records``: each lone op's
    ``record`` then)."""
    writer = _Writer(ops, args, leaves, turns)
    body = []
    for t, turn in enumerate(turns):
        if type(turn) is int:
            body += _lone(writer, t, turn, records[turn])
        else:
            body += _batch(writer, t, turn, recipes[t], rules[t][0])
    lines = ["def forward(ops, leaves, records, invoke, generic):",
             f"    {''.join(f'o{w}, ' for w in range(len(ops)))}= ops"]
    lines += [f"    a{k} = leaves[{k}]" for k in sorted(writer.leaves_read)]
    # (each op's inputs dropped once all ran, in the walker's order, as ``run_turns`` does)
    body.append(f"    {' = '.join(f'o{w}.args' for w in range(len(ops)))} = None")
    namespace = writer.namespace
    exec(compile("\n".join(lines + body), "<written unit forward>", "exec"), namespace)
    return namespace["forward"]


def _lone(writer, t: int, w: int, record) -> list:
    """A turn of one op: run as ``run_turns`` runs it (``batching.run_one``), or, where the
    written backward follows, its kernel called on its inputs as ``arrays_of`` reads them
    and its unit made and filed at ``record`` (its ``record`` before it ran) and its row
    set as ``units.note_unit`` does, with no sources and no ``unit`` for the op: as a
    batch's, they have no reader then (``run_written``)."""
    ran = [f"    run_one(o{w})", f"    r{t} = o{w}.results"]
    op = writer.ops[w]
    if op.unit is not None:
        ran.append(f"    u{t} = o{w}.unit()")
    if op.plan is None or type(op) is not LazyOp or op.unit is not None and record is None:
        return ran      # (a fused chain or a sum of gradient parts; a unit off its tape)
    try:
        arrays = [f"{slot!r}: {_read_code(writer, given)}"
                  for slot, given in writer.args[w].items()]
    except Unwritable:
        return ran
    plan = writer.constant(op.plan)
    lines = ["    if generic:", *(f"    {line}" for line in ran), "    else:",
             f"        arrays = {{{', '.join(arrays)}}}",
             f"        o{w}.results = r{t} = invoke({plan}, arrays, "
             f"{writer.constant(op.wants)}, o{w}.names)"]
    if op.unit is not None:
        lines += [f"        u{t} = Unit({plan}, 1, None, arrays, r{t})",
                  f"        records[{record[1]}] = u{t}",
                  f"        o{w}.row, o{w}.record = 0, None"]
    return lines


def _read_code(writer, given) -> str:
    """The code of a lone op's input ``given`` (its ``args`` entry), as ``arrays_of`` reads
    it (a batch's output cut as ``part_of`` cuts it); ``Unwritable`` where it reads None
    (left out of a list) or makes an array (``ShapeOnly``)."""
    if given is None:
        return "None"
    if type(given) is list:
        if any(entry is None for entry in given):     # (``in`` would compare arrays)
            raise Unwritable
        return "[" + ", ".join(_read_code(writer, entry) for entry in given) + "]"
    if type(given) is not tuple:
        if type(given) is not np.ndarray or id(given) not in writer.leaf:
            raise Unwritable
        return writer.given(given)
    d, k, j = given
    value = d.results[k]
    if value is not None and j >= 0:
        value = value[j]
    if value is None:
        raise Unwritable    # (an output its op was not asked for)
    if d.batch is None:
        return writer.output(d, k, j)
    size, _, offsets, stacked = d.batch     # (no output summed: a grad op's batch sums)
    code, row = f"{writer.results(d)}[{k}]" + (f"[{j}]" if j >= 0 else ""), d.row
    if offsets is not None:
        return f"{code}[{offsets[row]}:{offsets[row + 1]}]"
    if stacked:
        return f"{code}[{row}, ...]"
    rows = value.shape[0] // size
    return f"{code}[{row * rows}:{(row + 1) * rows}]"


def _batch(writer, t: int, turn: tuple, kept: BatchRecipes, ins: dict) -> list:
    """A batch, as ``batching.run_batch`` runs it by ``kept`` (``ins``: its rule's input
    modes)."""
    first = writer.ops[turn[0]]
    n = len(turn)
    writer.concatenate = writer.constant(first.plan.place.array_module().concatenate)
    unit = first.unit() if first.unit is not None else None
    if unit is None or kept.positions is None:
        # (ops recorded without a gradient, or off their tape's order: the walker's graphs
        # have none)
        raise Unwritable
    first_args = writer.args[turn[0]]
    inputs, listed = [], {}
    for slot, given in first_args.items():
        if given is None:
            inputs.append((slot, "None"))
        elif ins.get(slot) == SHARED:
            if type(given) is tuple:
                inputs.append((slot, writer.output(*given)))
            else:
                inputs.append((slot, writer.given(given)))
        elif type(given) is list:
            count = len(given)
            if any(len(writer.args[w][slot]) != count for w in turn):
                raise Unwritable
            entries = listed[slot] = [_column(writer, turn, kept, slot, i)
                                      for i in range(count)]
            inputs.append((slot, "[" + ", ".join(entries) + "]"))
        else:
            inputs.append((slot, _column(writer, turn, kept, slot, -1)))
    lines = [f"    # {first.plan.info.type} x{n}"]
    stack = STACK in ins.values()
    plan = writer.constant(unit.plan)
    if stack:   # (``batch_rules.stacked``'s blocks: the shapes and the plan this run's unit had)
        inputs = [(slot, _blocks(unit.arrays[slot], listed.get(slot), value)
                   if ins.get(slot) == STACK else value) for slot, value in inputs]
    lines.append("    arrays = {" + ", ".join(f"{slot!r}: {value}" for slot, value in inputs)
                 + "}")
    offsets = None if stack else kept.offsets
    if stack:
        lines.append(f"    r{t} = invoke({plan}, arrays, None, None)")
    else:
        lines.append(f"    r{t} = tuple(invoke({plan}, arrays, {writer.constant(first.wants)}, "
                     "None))")
    batch = writer.constant(first.batch)
    first_record, *other_records = kept.positions
    lines += [f"    u{t} = Unit({plan}, {n}, {writer.constant(ins)}, arrays, r{t}, "
              f"{writer.constant(offsets)}, {stack})",
              f"    records[{first_record}] = u{t}",
              "    if generic:",
              f"        u{t}.sources = {writer.sources(unit)}",
              f"        u{t}.filings = {writer.constant(kept.filings)}"]
    if other_records:
        lines.append(f"        {' = '.join(f'records[{p}]' for p in other_records)} = u{t}")
    named = [f"o{w}" for w in turn]
    lines += [f"        {' = '.join(f'{o}.unit' for o in named)} = weakref_ref(u{t})",
              f"    {', '.join(f'{o}.row' for o in named)}, = {tuple(range(n))}",
              f"    {' = '.join(f'{o}.record' for o in named)} = None",
              f"    {' = '.join(f'{o}.results' for o in named)} = r{t}",
              f"    {' = '.join(f'{o}.batch' for o in named)} = {batch}"]
    return lines


def _blocks(blocks, entries: list | None, value: str) -> str:
    """The source of a stacked input: ``value`` (or, for a list, its ``entries``) reshaped to
    the ``blocks`` this run's unit had."""
    if type(blocks) is list:
        return "[" + ", ".join(f"{entry}.reshape({block.shape})"
                               for entry, block in zip(entries, blocks)) + "]"
    return f"{value}.reshape({blocks.shape})"


def _column(writer, turn: tuple, kept: BatchRecipes, slot: str, index: int) -> str:
    """Input ``slot`` (entry ``index``) of a batch, as ``batch_inputs.gathered_again``
    takes it by its recipe."""
    recipe = kept.get((slot, index))
    if not recipe:
        raise Unwritable    # (none recorded: a part was None, ``batch_inputs.column``)
    groups, singles = recipe

    def argument(place: int):
        a = writer.args[turn[place]][slot]
        return a if index < 0 else a[index]

    if not singles and len(groups) == 1 and groups[0][2]:   # (the whole output)
        d, k, j = argument(groups[0][1][0])
        return f"{writer.results(d)}[{k}]" + (f"[{j}]" if j >= 0 else "")
    parts, trailing = [], None
    for rows, places, _ in groups:
        d, k, j = argument(places[0])
        value = d.results[k] if j < 0 else d.results[k][j]
        stacked = d.batch[3]
        code, count = rows_code(f"{writer.results(d)}[{k}]" + (f"[{j}]" if j >= 0 else ""),
                                value.shape, d.batch, rows, writer.constant)
        parts.append((places, code, count))
        trailing = trailing or value.shape[2 if stacked else 1:]
    if not groups and len(singles) == len(turn) and \
            tuple not in map(type, map(argument, singles)):     # (arrays given to each op)
        return f"{writer.concatenate}([" + \
            ", ".join(writer.given(argument(place)) for place in singles) + "])"
    for place in singles:
        a = argument(place)
        if type(a) is tuple:
            code, value = writer.output(*a), a[0].results[a[1]] if a[2] < 0 else \
                a[0].results[a[1]][a[2]]
        else:
            code, value = writer.given(a), a
        parts.append(([place], code, value.shape[0]))
        trailing = trailing or value.shape[1:]
    if len(parts) == 1 and not singles:
        return parts[0][1]
    return in_op_order_code(parts, trailing, writer.concatenate, writer.constant)
