"""A traced function's Graph for ``n`` calls at once, on their arguments stacked along a new
axis 0 (as JAX's ``vmap``, by lazy execution's batch rules).

Calls of a function whose ops split, concatenate or reduce along axis 0 (a sequence's steps cut
from one array, the mean of its losses) cannot run as one call on concatenated arguments
(``Graph.row_wise``). They can on stacked ones: every value an argument leads to is held either
*stacked*, ``(n,) +`` its shape in one call, or *flat*, its calls concatenated along axis 0;
values no argument leads to are *shared*, computed once. Each traced op is rewritten by its batch
rule (``tape.batch_rules``): one that concatenates its batched inputs runs on their flat form
(a shared input the rule concatenates is tiled ``n`` times), one that stacks them runs as its
``stacked_op`` on their stacked form; ``reshape2`` ops move a value between the two forms where
an op needs the other one. The function's results are stacked. An op without a rule, a rule that
refuses, or a result no argument leads to: no stacked Graph, and the calls run one by one.
"""
from __future__ import annotations

import dataclasses

from .batch_rules import CAT, ELEMENTWISE_BINARY, SHARED, STACK, rule_for, stacked_op
from .function_program import Graph, Step
from .registry import op_info


def stacked_graph(graph: Graph, n: int) -> Graph | None:
    """``graph`` for ``n`` calls on arguments stacked along a new axis 0 (captured inputs
    shared), its results stacked the same; None where some traced op cannot run so."""
    return _Stacking(graph, n).graph()


class _Refused(Exception):
    """A traced op that cannot run on its calls' values at once."""


class _Stacking:
    """The rewrite of one Graph for ``n`` calls: new steps over new value indices, the graph's
    inputs keeping theirs."""

    def __init__(self, graph: Graph, n: int):
        self.source = graph
        self.n = n
        self.per_call = graph.program(graph.traced)
        self.specs = self.per_call.specs        # every value's (shape, dtype), in one call
        self.steps = []
        self.size = graph.inputs
        self.stacked = {i: i for i in range(graph.arguments)}
        self.flat = {}
        self.shared = {i: i for i in range(graph.arguments, graph.inputs)}
        self.tiled = {}

    def graph(self) -> Graph | None:
        source = self.source
        try:
            for step, plan in zip(source.steps, self.per_call.plans):
                self._rewrite(step, plan)
            outputs = tuple(self._as_stacked(i) for i in source.outputs)
        except _Refused:
            return None
        traced = tuple(((self.n,) + tuple(shape), dtype) if k < source.arguments else
                       (shape, dtype) for k, (shape, dtype) in enumerate(source.traced))
        return dataclasses.replace(source, steps=tuple(self.steps), outputs=outputs,
                                   size=self.size, traced=traced, programs={}, by_arrays={},
                                   stacked={})

    def _rewrite(self, step: Step, plan) -> None:
        reads = {slot: index for slot, _, index in step.ins if index}
        if all(i in self.shared for index in reads.values() for i in index):
            self._add(step, {slot: [self.shared[i] for i in index]
                             for slot, index in reads.items()}, self.shared)
            return
        rule = rule_for(step.info.type)
        modes = None if rule is None else \
            rule(plan, {slot: [self.specs[i][0] for i in index] for slot, index in reads.items()})
        if modes is None:
            raise _Refused
        if step.info.type in ELEMENTWISE_BINARY and modes.get("Y") == SHARED and \
                not all(i in self.shared for i in reads["Y"]):
            self._broadcast(step, reads)
            return
        stack = STACK in modes.values()
        given = {}
        for slot, index in reads.items():
            how = modes.get(slot)
            if how == SHARED and all(i in self.shared for i in index):
                given[slot] = [self.shared[i] for i in index]
            elif how == STACK:
                given[slot] = [self._as_stacked(i) for i in index]
            elif how == CAT and not stack:
                given[slot] = [self._as_flat(i) for i in index]
            else:
                raise _Refused
        if stack:
            x_rank = len(self.specs[reads.get("X", next(iter(reads.values())))[0]][0])
            info, attrs, attrs_key = stacked_op(step.info, step.attrs, x_rank)
            step = Step(info, attrs, attrs_key, step.ins, step.outs)
        self._add(step, given, self.stacked if stack else self.flat)

    def _broadcast(self, step: Step, reads: dict) -> None:
        """An elementwise op whose Y, which an argument leads to, broadcasts over X's leading
        axes (``x - ops.mean(x)``): on the stacked forms, Y given ones for the axes it skips
        (its own calls' values stay on axis 0), broadcast as numpy does; a shared X is given a
        new axis 0 of one, which broadcasts over the calls."""
        (x,), (y,) = reads["X"], reads["Y"]
        x_shape, y_shape = self._shape(x), self._shape(y)
        axis = step.attrs.get("axis", -1)
        start = len(x_shape) - len(y_shape) if axis == -1 else axis
        ones = len(x_shape) - start - len(y_shape)
        aligned = self._reshape(self._as_stacked(y),
                                (self.n,) + (1,) * start + y_shape + (1,) * ones)
        x = self._reshape(self.shared[x], (1,) + x_shape) if x in self.shared else \
            self._as_stacked(x)
        attrs, attrs_key = step.info.checked_attrs({**step.attrs, "axis": -1})
        self._add(Step(step.info, attrs, attrs_key, step.ins, step.outs),
                  {"X": [x], "Y": [aligned]}, self.stacked)

    def _add(self, step: Step, given: dict, form: dict) -> None:
        """Append ``step`` (its op may be another than its slots' indices were found for: a
        stacked mean is a reduce_mean) reading ``given`` (new indices by slot); its outputs
        are new values, held in ``form``."""
        written = {slot: index for slot, _, index in step.outs}
        outs = []
        for s in step.info.outputs:
            index = written.get(s.name, ())
            made = tuple(range(self.size, self.size + len(index)))
            self.size += len(index)
            form.update(zip(index, made))
            outs.append((s.name, s.duplicable, made))
        self.steps.append(Step(step.info, step.attrs, step.attrs_key,
                               tuple((s.name, s.duplicable, tuple(given.get(s.name, ())))
                                     for s in step.info.inputs), tuple(outs)))

    def _as_stacked(self, i: int) -> int:
        if i in self.stacked:
            return self.stacked[i]
        if i not in self.flat:  # (a shared value: a result or a stacked input no argument
            raise _Refused      # leads to)
        made = self.stacked[i] = self._reshape(self.flat[i], (self.n,) + self._shape(i))
        return made

    def _as_flat(self, i: int) -> int:
        if i in self.flat:
            return self.flat[i]
        shape = self._shape(i)
        if not shape:
            raise _Refused      # (no axis 0 to concatenate along)
        if i in self.shared:    # (every call reads the same rows: the shared value, n times)
            if i not in self.tiled:
                repeats = [self.n] + [1] * (len(shape) - 1)
                self.tiled[i] = self._op("tile", {"repeat_times": repeats}, self.shared[i],
                                         ("Out",))[0]
            return self.tiled[i]
        made = self.flat[i] = self._reshape(self.stacked[i], (self.n * shape[0],) + shape[1:])
        return made

    def _shape(self, i: int) -> tuple:
        return tuple(self.specs[i][0])

    def _reshape(self, i: int, shape: tuple) -> int:
        return self._op("reshape2", {"shape": list(shape)}, i, ("Out", "XShape"))[0]

    def _op(self, op_type: str, attrs: dict, x: int, outputs: tuple) -> list:
        """Append an op of ``op_type`` reading value ``x`` as its X; its new ``outputs``."""
        info = op_info(op_type)
        attrs, attrs_key = info.checked_attrs(attrs)
        made = list(range(self.size, self.size + len(outputs)))
        self.size += len(outputs)
        self.steps.append(Step(
            info, attrs, attrs_key,
            tuple((s.name, s.duplicable, (x,) if s.name == "X" else ()) for s in info.inputs),
            tuple((s.name, s.duplicable, (made[outputs.index(s.name)],)
                   if s.name in outputs else ()) for s in info.outputs)))
        return made
