"""Running the pending ops a lazy value needs, with on-the-fly batching (DyNet's autobatching).

Ready ops of one *signature* run as one kernel call: their batched inputs are concatenated along
axis 0, the kernel runs once, and the ops share its outputs, each reading its own rows. The
signature is the op's CallPlan apart from the batch axis (op type, attributes, input shapes past
axis 0, dtypes, place, which inputs want gradients: ops on 1 and 3 rows batch, each keeping its
row offsets) plus the identity of its *shared* inputs: a weight every op of the batch reads is
passed once, never copied. Which inputs an op type concatenates, shares or stacks (a reduction
over axis 0 or everything runs past a new axis 0, a concat or split along axis 0 along axis 1)
is its *batch rule* (``tape.batch_rules``).
An op without a rule (random ops, optimizer updates) runs on its own. Each call is noted as a
unit for batched backward (``tape.units``).

Batching is on unless ``FLAGS_lazy_batching`` is off. Where it changes arithmetic: matrix
products (``mul``, ``matmul_v2``) of a batch are one BLAS call over all rows, which may block
and round differently from row-at-a-time calls, and a stacked reduction sums along other axes
(float32 rounding, not bit-equal); elementwise ops, activations, softmaxes, lookups,
concat/split/slice and row reductions compute each element as they would alone.
"""
from __future__ import annotations

import operator
import threading

from . import flags as _flags
from . import fusion_steps
from .batch_inputs import BatchRecipes, row_offsets
from .batch_inputs import column as _column
from .batch_inputs import gathered as _gathered
from .batch_rules import SHARED, STACK, rule_of, stacked
from .batch_signatures import (
    accumulation_may_fuse,
    plan_entries,
    plan_entry,
    shared_signature,
    signature,  # noqa: F401  (batching.signature, as its users read it)
)
from .dispatch import invoke
from .fusion import FusedGroup, fuse_chains, run_chains
from .pending import LazyOp, ShapeOnly, arrays_of, read
from .units import note_fused, note_unit


def run_ops(needed: list, turns: list | None = None) -> None:
    """Run the pending ops of ``needed`` (``pending.prune``'s answer): batched by signature
    when FLAGS_lazy_batching is on, else one by one in record order; with FLAGS_lazy_fusion
    on, each chain ``tape.fusion`` finds among them runs as one loop. ``turns``, a list, gets
    the agenda's kernel calls in order, each the position in ``needed`` of its op or a tuple
    of its ops' positions, for ``run_turns`` (none where fusion grouped ops)."""
    at = None if turns is None else {id(op): i for i, op in enumerate(needed)}
    flags = _flags.flags
    fusion = len(needed) > 1 and flags["FLAGS_lazy_fusion"] and not flags["FLAGS_check_nan_inf"]
    if len(needed) == 1 or not flags["FLAGS_lazy_batching"]:
        if fusion:
            needed = fuse_chains(needed)
        needed.sort(key=_record_order)
        for op in needed:
            op.users = None
            run_one(op)
        return
    agenda = Agenda(needed)
    # Looking for chains costs a few µs of Python per op (``fusion.fuse_chains``); the
    # agenda's pass over the ops tells whether any could join one, so that an execution of
    # small arrays (every Tree-LSTM and LM step) skips the search
    if fusion and agenda.may_fuse:
        fused = fuse_chains(needed)
        if fused is needed:     # (no group: the same ops, maybe in another order)
            agenda.first = [i for i, op in enumerate(needed) if not op.waiting]
        else:
            needed = fused
            agenda = Agenda(needed)
            at = None
    trace = None if at is None else []
    try:
        agenda.run(trace)
    except BaseException:
        _drop_args_of_ran(needed)
        raise
    if trace:
        turns += [at[id(group[0])] if len(group) == 1 else tuple(at[id(op)] for op in group)
                  for group in trace]
    # The ops of batches that made units drop their inputs here, all at once, rather than
    # as each batch runs (``units.note_unit``): dropping them frees the refs and the producing
    # ops no Variable holds, and freeing those in the prune walk's order (one sample's stretch
    # of the graph after another), not batch by batch across every sample's, cost the forest
    # and 16-sequence steps
    # 2-3 ms less (of ~50, loaded machine). What they read lives until here: a value of a
    # batch with a unit lived as long before (its unit holds it until backward); a value that
    # only these ops read and whose op made no unit (no gradient through it) lives until the
    # execution ends rather than until its last reader ran.
    for op in needed:
        op.args = None


def run_turns(needed: list, turns: list, recipes: list | None = None,
              filings: list | None = None) -> None:
    """Run ``needed`` (``pending.prune``'s answer) in ``turns``, the kernel calls ``run_ops``
    made on the same graph before: the same batches in the same order, without deciding them
    again (no signatures, agenda or search for fused chains). ``recipes``, per turn, where
    its batch's inputs came from (``batch_inputs.column``), and ``filings``, where their
    gradients go (``Unit.filings``), both kept across runs of one graph: the first run
    makes each batch's ``batch_inputs.BatchRecipes``, which later ones follow."""
    for op in needed:
        op.users = None
    try:
        for t, turn in enumerate(turns):
            if type(turn) is int:
                run_one(needed[turn])
            elif recipes is None:
                run_group([needed[i] for i in turn])
            else:
                kept = recipes[t]
                if type(kept) is BatchRecipes:
                    group = kept.pick(needed)
                else:   # (the graph's first run by these turns)
                    group = [needed[i] for i in turn]
                    kept = recipes[t] = BatchRecipes(turn, group, filings[t])
                _turn.recipes = kept
                run_group(group)
                _turn.recipes = None    # (taken by its run_batch, unless it ran no kernel)
    except BaseException:
        _drop_args_of_ran(needed)
        raise
    finally:
        _turn.recipes = None
    for op in needed:
        op.args = None


def _drop_args_of_ran(needed: list) -> None:
    for op in needed:
        if op.results is not None:
            op.args = None


def run_group(group: list) -> None:
    """Run the ops of one agenda turn of two or more (same signature, record order) as one
    kernel call."""
    if group[0].plan is None:
        if group[0].kind[0] == "fused":
            note_fused(group)
            run_chains(group)
        else:
            run_accumulations(group)
    else:
        run_batch(group, rule_of(group[0]))


def run_one(op) -> None:
    """Run one LazyOp's kernel on its inputs' values; it keeps its results, drops its inputs."""
    plan = op.plan
    if plan is None:     # a gradient Accumulation or a fused chain: no kernel of a plan
        if type(op) is FusedGroup:
            note_fused([op])
        op.run()
        return
    arrays = arrays_of(op)
    op.results = invoke(plan, arrays, op.wants, op.names)
    if plan.requires_grad:
        note_unit([op], None, arrays, op.results)
    op.args = None


class Agenda:
    """DyNet's agenda-based scheduling over a set of pending ops.

    An op is *ready* when everything it reads has run. Ready ops wait in groups by signature.
    Each turn runs one group as one kernel call, chosen so that batches come out large:

    - the group with the most ready ops goes first: a signature with many ready ops is a big
      batch now, and running it tends to make the next step of those same chains (the next
      op of each tree's cell) ready together;
    - a lone ready op whose signature still has other ops to come (not ready yet) waits while
      any other group can run: run now it would be a batch of one, and later its siblings
      will likely be ready with it (the leaves of 16 trees reach the same cell op at
      different times). It runs when nothing else can.

    An op no other op can join (no batch rule, or the last of its signature) runs as soon as
    it is ready: it cannot batch, and running it can only make more ops ready. Ties go to the
    group whose first op was recorded first, so a run is deterministic.

    The work per op is a signature (a dict lookup of its plan's batch rule, plus the identity
    of its shared inputs where the rule has some), a count, and, once it ran, a countdown of
    its users; everything that does not change from op to op of a plan (the rule, which
    inputs are shared, how each is passed) is decided once per plan (``batch_rules.rule_of``).
    """

    def __init__(self, needed: list):
        """Each op of ``needed`` (with ``waiting`` and ``users``, ``pending.prune``) gets its
        ``sig`` (None: no batch rule, it runs alone), counted in ``left``. Holds no op: until
        ``run``, ``fusion.fuse_chains`` may count the references to them."""
        self.left = left = {}               # signature -> its ops not run yet
        self.ready = {}                     # signature -> ready ops, in the order they became
        self.alone = []                     # ready ops nothing can join
        # whether an op of ``needed`` could join a fused chain (``fusion_steps.node``)
        may_fuse = False
        entries = plan_entries
        min_elements = fusion_steps.MIN_ELEMENTS
        # one tuple per signature with shared inputs, which its ops share (each op's own
        # would be freed with it, long after the execution, for nothing)
        interned = {}
        self.needed = needed
        self.first = first = []             # positions in ``needed`` of the ops ready first
        for i, op in enumerate(needed):
            plan = op.plan
            if plan is None:    # an Accumulation or a fused chain
                sig = op.kind
                if not may_fuse:
                    may_fuse = accumulation_may_fuse(op, min_elements)
            else:
                entry = entries.get(plan)
                if entry is None or entry[3] != min_elements:
                    entry = plan_entry(op, min_elements)
                sig, rule, joins, _ = entry
                if sig is None and rule is not None:
                    sig = shared_signature(op, rule)
                    sig = interned.setdefault(sig, sig)
                if joins:
                    may_fuse = True
            op.sig = sig
            if sig is not None:
                left[sig] = left.get(sig, 0) + 1
            if not op.waiting:
                first.append(i)
        self.may_fuse = may_fuse

    def run(self, trace: list | None = None) -> None:
        """Run the ops, turn by turn; ``trace``, a list, gets each turn's ops."""
        alone, ready, left = self.alone, self.ready, self.left
        lone, waiting_for = alone.append, ready.get
        needed = self.needed
        for i in self.first:    # (in record order, as if they became ready in that order)
            op = needed[i]
            sig = op.sig
            if sig is None or left[sig] == 1:
                alone.append(op)
            else:
                group = ready.get(sig)
                if group is None:
                    ready[sig] = [op]
                else:
                    group.append(op)
        while alone or ready:
            if alone:
                op = alone.pop()
                group = (op,)
                run_one(op)
            else:
                # (one signature ready, the only choice: most turns of a graph with little to
                # batch)
                group = ready.popitem()[1] if len(ready) == 1 else ready.pop(self.choose())
                if len(group) == 1:
                    run_one(group[0])
                else:
                    group.sort(key=_record_order)
                    run_group(group)
            if trace is not None:
                trace.append(group)
            sig = group[0].sig
            if sig is not None:
                left[sig] -= len(group)
            for op in group:     # (this runs once per edge)
                for user in op.users:
                    waiting = user.waiting - 1
                    user.waiting = waiting
                    if not waiting:
                        sig = user.sig
                        if sig is None or left[sig] == 1:
                            lone(user)
                        else:
                            same = waiting_for(sig)
                            if same is None:
                                ready[sig] = [user]
                            else:
                                same.append(user)
                op.users = None

    def choose(self):
        """The signature to run next of two or more ready (see the class docstring)."""
        ready = self.ready
        best, best_key = None, None
        left = self.left
        for sig, group in ready.items():
            n = len(group)
            key = (0 if n == 1 and left[sig] > 1 else n, -group[0].order)
            if best_key is None or key > best_key:
                best, best_key = sig, key
        return best


_record_order = operator.attrgetter("order")
# ``recipes``: set by ``run_turns`` for the batch it runs next of a graph whose recipes it
# keeps: that batch's ``batch_inputs.BatchRecipes``, taken by its ``run_batch``. Per thread,
# as the global tape is; not an argument: ``run_batch(ops, rule)`` is what tests and
# benchmarks wrap to count batches.
_turn = threading.local()
_turn.recipes = None


def run_batch(ops: list, rule) -> None:
    """Run ``ops`` (same signature; ``rule`` their batch rule) as one kernel call and give
    each its part of the result."""
    recipes = getattr(_turn, "recipes", None)     # (None in a thread that set none)
    filings = None
    if recipes is not None:
        filings = recipes.filings
        _turn.recipes = None
    ins, sums = rule[0], rule[1]
    first = ops[0]
    n = len(ops)
    concatenate = first.plan.place.array_module().concatenate
    arrays = {}
    # the inputs' ``Unit.sources``, gathered with them where a unit will be made
    wants_grad = first.plan.wants_grad if first.plan.requires_grad and \
        type(first) is LazyOp else None
    sources = {} if wants_grad is not None else None
    for slot, given in first.args.items():
        t = type(given)
        if given is None:
            arrays[slot] = None
        elif ins.get(slot) == SHARED:
            arrays[slot] = arrays_of(first)[slot] if t is list else \
                read(given) if t is tuple else given.array() if t is ShapeOnly else given
            pieces = None if t is list or t is tuple else _wanted(sources, wants_grad, slot, 0)
            if pieces is not None:      # (an array given to the first op: ``units._sources``)
                pieces.append((None, 0))
        elif t is ShapeOnly:
            arrays[slot] = given.stacked(n).array()
        elif t is list:
            count = len(given)
            if all(len(op.args[slot]) == count for op in ops):
                arrays[slot] = [g.stacked(n).array() if type(g) is ShapeOnly
                                else _column(ops, slot, concatenate, i,
                                             _wanted(sources, wants_grad, slot, i), recipes)
                                for i, g in enumerate(given)]
            else:   # (parts a batch summed elsewhere read as None and are left out)
                per_op = [arrays_of(op)[slot] for op in ops]
                arrays[slot] = [g.stacked(n).array() if type(g) is ShapeOnly
                                else concatenate([p[i] for p in per_op])
                                for i, g in enumerate(given)]
        else:
            arrays[slot] = _column(ops, slot, concatenate, -1,
                                   _wanted(sources, wants_grad, slot, 0), recipes)
    plan = first.plan
    positions = None if recipes is None else recipes.positions
    if STACK in ins.values():   # (one more axis in front: reductions over axis 0, concat/split)
        plan = stacked(arrays, ins, plan, n)
        result = invoke(plan, arrays, None, None)
        if not note_unit(ops, ins, arrays, result, None, plan, (n, sums, None, True),
                         sources, filings, positions):
            _hand_out(ops, result, sums, None, True)
        return
    result = tuple(invoke(plan, arrays, first.wants, None))
    offsets = row_offsets(ops) if recipes is None else recipes.offsets
    if not note_unit(ops, ins, arrays, result, offsets, None, (n, sums, offsets, False),
                     sources, filings, positions):
        _hand_out(ops, result, sums, offsets)


def _wanted(sources, wants_grad, slot: str, i: int):
    """The list for the ``Unit.sources`` pieces of input ``slot[i]``, if it wants a gradient
    and a unit is made; else None."""
    wants = None if sources is None else wants_grad.get(slot)
    if not wants or not wants[i]:
        return None
    pieces = sources[(slot, i)] = []
    return pieces


def _hand_out(ops: list, result: tuple, sums: tuple, offsets=None, stacked=False) -> None:
    """Give each op of a batch the batch's whole ``result`` and its row in it (its rows start
    at ``offsets`` where they differ in number; ``stacked``: its place on a new axis 0); it
    drops its inputs."""
    batch = (len(ops), sums, offsets, stacked)
    row = 0
    for op in ops:
        op.results = result
        op.batch = batch
        op.row = row
        op.args = None
        row += 1


def run_accumulations(ops: list) -> None:
    """Run gradient Accumulations of one kind as a batch: part ``i`` of every op concatenated,
    the concatenations added in order (each element summed as the op alone sums it); one by
    one where a part is None (summed into another by a batch)."""
    concatenate = ops[0].kind[-1].concatenate
    total = None
    for i in range(len(ops[0].args["X"])):
        column = _gathered(ops, "X", concatenate, i)
        if column is None:
            for op in ops:
                op.run()
            return
        total = column if total is None else total + column
    _hand_out(ops, (total,), ())
