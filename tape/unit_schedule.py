"""Cached execution of a lazy graph that goes by units (``tape.batched_backward``).

A training loop records the same graph every step. Where its backward goes by the forward
batches, the uncached path re-decides every time what the graph fixes: the prune walk, the
agenda's signatures and choices (``tape.batching``). ``lazy_replay``'s walker checks that a
backward's graph is the one a schedule was made for, op by op, in the same state; its ops,
in the walker's order, then run in the kept *turns*: the agenda's kernel calls of that
graph's uncached backward, each the walker's places of its ops (record order within a
batch), so the same batches run in the same order on the same inputs and results are bit
for bit the uncached path's; from the schedule's third run, as the one function its second
run (the first by the recipes) wrote out (``tape.unit_forward``). Then the batched backward
runs, each input gradient that goes to several places (a batch of tree nodes' children)
filed by the route its first run recorded; from the schedule's second run, as the one
function written out from what its first run kept (``tape.unit_backward``). A schedule holds
no value and no op, only positions (and index arrays), and its written functions no more.
"""
from __future__ import annotations

from operator import itemgetter

from . import batched_backward, batching, fusion_steps
from .batched_backward import run_batched_backward
from .batching import run_turns
from .pending import read
from .unit_backward import write_backward
from .unit_forward import run_and_write, run_written


class UnitSchedule:
    """The forward kernel calls of one graph state that goes by units: ``turns``, each the
    walker's place of a lone op or a tuple of a batch's; made while arrays of
    ``min_elements`` could join fused groups (``fusion_steps.MIN_ELEMENTS``: with another
    threshold the agenda may decide otherwise, so the schedule does not run)."""

    __slots__ = ("turns", "recipes", "filings", "min_elements", "layout", "runs", "forward")

    def __init__(self, turns: list, places: dict):
        """``turns`` as ``batched_backward._forward_batches`` gives them (record positions),
        named by ``places`` (record position -> the walker's place)."""
        self.turns = [places[turn] if type(turn) is int else tuple(places[p] for p in turn)
                      for turn in turns]
        # per batch, where its inputs' rows come from (``batch_inputs.column``) and what
        # else its first run found: a ``batch_inputs.BatchRecipes`` from that run on
        self.recipes = [{} if type(turn) is tuple else None for turn in turns]
        # per batch, where the gradients of its inputs read in several pieces go
        # (``Unit.filings``: op places and index arrays), recorded by the first run too
        self.filings = [{} if type(turn) is tuple else None for turn in turns]
        self.min_elements = fusion_steps.MIN_ELEMENTS
        self.layout = HandleLayout()    # (found by the first run's backward too)
        self.runs = 0
        # the forward written out by the first run that follows the recipes (its second:
        # ``unit_forward``), which runs from then on; False where it could not be written
        self.forward = None

    def run(self, ops: list, leaves: tuple, handles: list, records: list, loss) -> bool:
        """Backward of ``loss`` over ``handles`` (``records``, as for
        ``run_batched_backward``) whose graph's ops ``ops`` and given arrays ``leaves`` the
        walker found, in its order: the forward ops in the kept turns (from the third run by
        the function the second wrote out), then the batched backward. False if the schedule
        does not fit (nothing ran) or the backward did not go by units (the loss computed):
        the uncached path then runs. ``ops`` is emptied as soon as the forward ran, so that
        nothing holds the ops' results longer than the uncached path does."""
        if self.min_elements != fusion_steps.MIN_ELEMENTS:
            return False
        forward = self.forward
        if forward:
            run_written(forward, ops, leaves, records, not self.layout.written)
        elif forward is None and self.runs:
            self.forward = run_and_write(self.turns, self.recipes, self.filings, ops,
                                         leaves) or False
        else:
            run_turns(ops, self.turns, self.recipes, self.filings)
        self.runs += 1
        ops.clear()
        ref = loss._lazy
        loss._value = read(ref)
        loss._lazy = None
        return self.layout.run(handles, records, loss)


class HandleLayout:
    """Which handles each unit of a schedule's batched backward takes, and where the loss's
    gradient starts: the graph the walker checked fixes both, as it fixes the kept turns
    (each turn's ops at the same record positions, so each unit is filed in the tape's
    records as before: ``units._place``). Found by the schedule's first run
    (``batched_backward._units``: a pass over every handle and record, a search for the
    loss's op and a sort) and given out from then on, one slice or ``itemgetter`` call per
    unit. Per unit it also keeps where each input gradient of one piece goes, found by
    that run's backward (``batched_grads.file_gradient``). The run after it writes the whole
    backward out from all that (``unit_backward.write_backward``), run from then on."""

    __slots__ = ("order", "seed", "kept", "written")

    def __init__(self):
        # per unit, in the order backward reaches them: (its first record position, what
        # takes its handles from the tape's); the seed: (its unit's place in ``order``,
        # output slot index, index, row); per unit, where its one-piece input gradients go
        # (``batched_grads.file_gradient``), found by the first run's backward
        self.order = self.seed = self.kept = None
        self.written = None     # the written backward (``unit_backward``); False: not written

    def run(self, handles: list, records: list, loss) -> bool:
        """The batched backward of ``loss`` (computed) over ``handles`` (``records``, as for
        ``run_batched_backward``): the written one, once a first run found what it needs."""
        written = self.written
        if written is None and self.order is not None:
            written = self.written = write_backward(self, handles, records, loss) or False
        if written:
            written(handles, records, batching.invoke, batched_backward._release)
            return True
        # (whether each unit's backward can run as one follows from the graph and its
        # state, which the walker checked: ``_applies`` said so when the schedule was made)
        return run_batched_backward(handles, records, loss, checked=True, layout=self)

    def record(self, handles: list, units: list, seed: tuple) -> None:
        """Keep how ``units`` (``batched_backward._units``: their handles given, in
        backward's order) took their handles from ``handles`` (every op of a turn is on
        this tape: the walker checked it), and ``seed``."""
        where = {id(h): p for p, h in enumerate(handles)}
        order = []
        for unit in units:
            positions = [where[id(h)] for h in unit.handles]
            first, count = positions[0], len(positions)
            step = positions[1] - first if count > 1 else 1
            if step > 0 and positions == list(range(first, first + step * count, step)):
                take = itemgetter(slice(first, first + step * count, step))
            else:
                take = itemgetter(*positions)
            order.append((first, take))
        unit, k, j, row = seed
        self.kept = [{} for _ in order]
        self.seed = (units.index(unit), k, j, row)
        self.order = order      # (last: another thread's backward reads it first)

    def units(self, handles: list, records: list, units: list) -> tuple:
        """Fill ``units`` as ``record`` found them, from this run's ``records`` (each unit
        itself at its first record position: a turn's ops are on this tape in record order)
        and ``handles``; return the seed."""
        for first, take in self.order:
            unit = records[first]
            unit.handles = take(handles)
            units.append(unit)
        at, k, j, row = self.seed
        return units[at], k, j, row
