"""The ops a traced function recorded (``tape.function``), run as one op's kernels.

A ``Graph`` is what tracing found, independent of shapes: the traced ops in record order, each
input bound to a value (the function's arguments first, then its captured Variables, then the
traced ops' outputs), and which values the function returns. A ``Program`` is the graph at one
signature of its inputs (shapes and dtypes): each op's CallPlan, asked of the dispatch core's
``infer`` once per signature, so the same graph serves the shapes it was traced at and the
concatenated arguments of a lazy batch, written out as straight code (``tape.function_code``):
its ``forward`` runs each plan's kernel, its ``backward`` the traced ops' grad steps in reverse.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

from . import dtypes
from .batch_rules import CAT, SHARED, rule_for
from .dispatch import infer
from .function_code import write_backward, write_forward
from .var_desc import VarDesc


class Step(NamedTuple):
    """One traced op: its OpInfo, checked attributes (and their key), and per slot, in the
    op's slot order, the values it reads (``ins``) and writes (``outs``), as
    ``((slot, duplicable, (value index, ...)), ...)``; a slot it was not given, or an output
    it does not write, binds none."""

    info: object
    attrs: dict
    attrs_key: object
    ins: tuple
    outs: tuple


# Programs a Graph keeps (one per signature of its inputs: a lazy batch of a new size makes
# one): past this many, it starts again
PROGRAM_CACHE_LIMIT = 256


@dataclasses.dataclass(eq=False)
class Graph:
    """What tracing a function found: ``steps`` (Steps in record order) over ``size`` values,
    of which the first ``len(wants)`` are the op's inputs (``arguments`` arguments, then the
    captured Variables), with ``wants`` saying which of those want gradients and
    ``input_dtypes`` their dtypes; ``outputs`` are the returned values' indices; ``place`` is
    where the traced ops ran, ``traced`` the inputs' ``(shape, dtype code)`` there (a trace is
    made per signature: every call's). ``programs`` and ``by_arrays`` keep its Programs by the
    inputs' ``(shape, dtype code)`` and by their arrays' ``(shape, numpy dtype)``; ``stacked``
    its Graphs for calls at once, by their number (``tape.function_stacking``; None: refused).
    """

    steps: tuple
    arguments: int
    wants: tuple
    input_dtypes: tuple
    outputs: tuple
    size: int
    place: object
    traced: tuple
    programs: dict = dataclasses.field(default_factory=dict)
    by_arrays: dict = dataclasses.field(default_factory=dict)
    stacked: dict = dataclasses.field(default_factory=dict)

    @property
    def inputs(self) -> int:
        """How many inputs the op takes: arguments and captured Variables."""
        return len(self.wants)

    def program(self, specs: tuple) -> Program:
        """The Program at inputs of ``specs`` (``(shape, dtype code)`` per input), inferred
        once: an inner op's shape error is raised here, naming that op."""
        program = self.programs.get(specs)
        if program is None:
            if len(self.programs) >= PROGRAM_CACHE_LIMIT:
                self.programs.clear()
                self.by_arrays.clear()
                self.stacked.clear()
            calls = self.calls_stacked(specs)
            program = self.programs[specs] = Program(self, specs) if calls is None else \
                self.stacked_for(calls).program(specs)
        return program

    def calls_stacked(self, specs: tuple) -> int | None:
        """How many calls' arguments ``specs`` stacks along a new axis 0 (a lazy batch of calls
        that are not row-wise), or None: inputs of one call, or of calls concatenated."""
        shape, traced = specs[0][0], self.traced[0][0]
        return shape[0] if len(shape) == len(traced) + 1 else None

    def stacked_for(self, n: int) -> Graph | None:
        """This graph for ``n`` calls at once on stacked arguments, or None where it cannot be
        (``tape.function_stacking``)."""
        from .function_stacking import stacked_graph  # (which makes Graphs: a cycle)
        if n not in self.stacked:
            self.stacked[n] = stacked_graph(self, n)
        return self.stacked[n]

    def stacks(self) -> bool:
        """Whether calls can run at once on their arguments stacked along a new axis 0 (every
        argument has an axis 0 to concatenate them along)."""
        return all(len(shape) >= 1 for shape, _ in self.traced[:self.arguments]) and \
            self.stacked_for(2) is not None

    def program_of(self, arrays: list) -> Program:
        """The Program for input ``arrays`` (a kernel's view: shapes and dtypes of values)."""
        key = tuple([(a.shape, a.dtype) for a in arrays])
        program = self.by_arrays.get(key)
        if program is None:
            specs = tuple((shape, dtypes.from_numpy(dtype)) for shape, dtype in key)
            program = self.by_arrays[key] = self.program(specs)
        return program

    def row_wise(self, specs: tuple) -> bool:
        """Whether row ``i`` of every output depends on row ``i`` of the arguments alone (and
        on the captured Variables), so that calls can run as one on concatenated arguments:
        every traced op that reads an argument-derived value must concatenate each such input
        and share each captured-derived one under its batch rule (``tape.batch_rules``); an op
        reading only captured-derived values computes the same for every call."""
        if any(len(shape) < 1 for shape, _ in specs[:self.arguments]):
            return False
        program = self.program(specs)
        rows = [True] * self.arguments + [False] * (self.size - self.arguments)
        for step, plan in zip(self.steps, program.plans):
            reads_rows = {slot: [rows[i] for i in index] for slot, _, index in step.ins if index}
            if any(any(r) for r in reads_rows.values()):
                if not _concatenates_rows(step, plan, program.specs, reads_rows):
                    return False
                for _, _, index in step.outs:
                    for i in index:
                        rows[i] = True
        return all(rows[i] for i in self.outputs)


def _concatenates_rows(step: Step, plan, specs: list, reads_rows: dict) -> bool:
    rule = rule_for(step.info.type)
    if rule is None:
        return False
    modes = rule(plan, {slot: [specs[i][0] for i in index] for slot, _, index in step.ins
                        if index})
    if modes is None:
        return False
    return all(modes.get(slot) == (CAT if all(r) else SHARED) and (all(r) or not any(r))
               for slot, r in reads_rows.items())


class Program:
    """A Graph at one signature of its inputs: each step's CallPlan (``plans``), each value's
    ``(shape, dtype)`` (``specs``), and the Program written out (``tape.function_code``):
    ``forward(inputs)`` gives every value, ``backward(values, out_grads)`` the gradients of
    the inputs (None where none flows)."""

    __slots__ = ("graph", "plans", "specs", "output_specs", "counts", "forward", "backward")

    def __init__(self, graph: Graph, specs: tuple):
        self.graph = graph
        values = list(specs) + [None] * (graph.size - len(specs))
        wants = list(graph.wants) + [False] * (graph.size - len(specs))
        plans, counts = [], []
        for step in graph.steps:
            descs = {slot: [VarDesc.temporary(*values[i], not wants[i]) for i in index]
                     for slot, _, index in step.ins if index}
            plan = infer(step.info, step.attrs, step.attrs_key, descs, graph.place)
            for (_, _, index), (_, _, out_specs, carries) in zip(step.outs, plan.outputs):
                for i, spec in zip(index, out_specs or ()):
                    values[i] = spec
                    wants[i] = plan.requires_grad and carries
            plans.append(plan)
            counts.append(({slot: len(index) for slot, _, index in step.ins if index},
                           {slot: len(index) for slot, _, index in step.outs if index}))
        self.plans = tuple(plans)
        self.counts = tuple(counts)
        self.specs = values
        self.output_specs = [values[i] for i in graph.outputs]
        # forward(inputs) -> every value; backward(values, out_grads) -> the inputs' gradients
        self.forward = write_forward(self)
        self.backward = write_backward(self)
