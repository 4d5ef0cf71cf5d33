"""Fusion: a group of pending elementwise ops, forward or grad, runs as one numba loop
(``kernels/fused.py``).

Before a lazy execution's scheduler runs (``tape.batching.run_ops``), groups are found among
the pending ops it is given. An op can join one if it is a CPU op of ``fusion_steps`` (forward
elementwise ops, their grad ops with equal shapes) or a gradient ``Accumulation``, all of its
outputs and inputs of one shape and floating dtype. A group is a DAG, not only a chain: the
grad ops of ``y = x * w`` give dX and dY from one dOut, and forward values feed both the next
forward op and the grad ops that read them.

Which ops form a group: every pending op gets a *level*, the largest number of *barriers* on
a path into it, a barrier being an edge into an op that cannot join or between fusable ops of
different shapes or dtypes. Ops of one level joined by an edge between fusable ops of one kind
form one group. No path leaves a group and comes back (it would enter a barrier and arrive a
level higher), so a group runs as one op, and the groups and the other ops still form a DAG.
An edge out of an op that cannot join is no barrier: such an op reached from no group member
(``reduce_sum_grad``, which reads only its input's shape) does not split what follows it from
what precedes, so a forward chain and the grad ops that read its values run as one loop, and
values only the grad ops read never leave registers.

What a group stores: an output read by an op outside the group, or held by anything else (a
Variable, a backward handle keeping it for a gradient, a request for it, a pending op outside
this execution) is stored, every other value stays in registers. "Anything else" is checked on
the references themselves: each holder adds a reference to the op's ref tuple or to the op, so
reference counts tell (no intermediate anyone can still ask for is skipped). Several outputs are
written by one pass over the elements.

The loop rounds every step to the dtype, so ``+ - * /``, scale, relu, square and sqrt, and
their gradients, give the unfused kernels' results bit for bit; exp, log, tanh and sigmoid call
libm's scalar functions where the unfused kernels call numpy's vectorised ones, and may differ
in the last bit. Loops are compiled once per group signature (the steps, their operand wiring,
which values are stored, the dtype) and reused across iterations and processes (a disk cache):
attribute values (scale's factor and bias) are arguments. Identical groups batch into one call.

On unless ``FLAGS_lazy_fusion`` is off; off while the NaN/Inf check is on, which names the op
that made a value.
"""
from __future__ import annotations

import sys

import numpy as np

from . import dtypes, fusion_steps
from . import flags as _flags
from .dispatch import invoke
from .fusion_steps import node as _node
from .pending import LazyOp, arrays_of, read


class FusedGroup(LazyOp):
    """A group of pending ops run as one loop: to the scheduler an op (``plan`` None, like an
    Accumulation) reading the group's outside inputs, which batches with the groups of its
    ``kind`` (``run_chains``); running it gives each member the outputs the group stores."""

    __slots__ = ("kind", "members", "program", "scalars", "shape", "dtype", "stores")

    def __init__(self, members: list, inputs: list, program: tuple, scalars: tuple, shape,
                 dtype, stores: list):
        super().__init__(None, {"X": inputs}, None)
        self.kind = ("fused", program, scalars, shape, dtype)    # what batches with it
        self.order = members[-1].order
        self.members = members
        self.program = program
        self.scalars = scalars
        self.shape = shape
        self.dtype = dtype
        self.stores = stores    # per member: ((output slot, output array index), ...)

    def run(self) -> None:
        run_chains([self])


def run_chains(groups: list) -> None:
    """Run FusedGroups of one ``kind`` (program, attribute values, shape, dtype) as one loop
    over their inputs concatenated (each element computed as one group alone computes it);
    each member gets its part of the stored outputs."""
    from .kernels import fused
    first = groups[0]
    dtype, shape = first.dtype, first.shape
    columns = []
    for k in range(len(first.args["X"])):
        column = []
        for group in groups:
            a = group.args["X"][k]
            value = read(a) if type(a) is tuple else a
            if value is None or value.dtype != dtype or value.shape != shape:
                for g in groups:    # (an input's kind was not what its producer said)
                    _run_unfused(g)
                return
            column.append(value.reshape(-1))
        columns.append(column[0] if len(column) == 1 else np.concatenate(column))
    size = columns[0].size // len(groups) if columns else int(np.prod(shape))
    outputs = [np.empty(size * len(groups), dtype) for _ in first.program[1]]
    # each scalar rounded to the dtype once, as numpy rounds a Python float operand
    fused.run_group(first.program, dtype, columns, outputs, np.array(first.scalars, dtype))
    for g, group in enumerate(groups):
        parts = [out[g * size:(g + 1) * size].reshape(shape) for out in outputs]
        for op, stores in zip(group.members, group.stores):
            if stores:
                results = [None] * _output_count(op)
                for n, k in stores:
                    results[n] = parts[k]
                op.results = tuple(results)
        _done(group)


def _run_unfused(group) -> None:
    for op in group.members:
        if op.plan is None:
            op.run()
        else:
            op.results = invoke(op.plan, arrays_of(op), op.wants, op.names)
            op.args = None
    _done(group)


def _done(group) -> None:
    for op in group.members:
        op.args = None
        op.users = None
    group.members = group.args = None
    group.results = ()


def _output_count(op) -> int:
    return 1 if op.plan is None else len(op.plan.outputs)


def fuse_chains(needed: list, small: bool = False) -> list:
    """``needed`` (``pending.prune``'s answer, with ``waiting`` and ``users``) with each group
    of two or more fusable ops replaced by one FusedGroup; ``small``: arrays of any size join
    (``fusion_steps.node``)."""
    nodes = []
    found = False
    for op in needed:   # (``_held`` counts references: nothing here may hold an op yet)
        node = _node(op, small)
        if node is not None:
            kind, expressions, libm = node
            held = _held(op)
            if libm and (held or len(op.users) != 1):
                node = None     # (see fusion_steps.LIBM)
            else:
                found = True
                node = (kind, expressions, held)
        nodes.append(node)
    op = None
    if not found or not fusion_steps.may_join(needed, nodes):
        return needed
    # record order is a topological order: an op is made after its inputs
    in_order = sorted(range(len(needed)), key=lambda i: needed[i].order)
    needed[:] = [needed[i] for i in in_order]
    nodes = [nodes[i] for i in in_order]
    groups = _groups(needed, nodes)
    if not groups:
        return needed
    if not _flags.flags["FLAGS_lazy_batching"]:
        # run in record order: a group runs at its last member's place, so no op outside it
        # may read a member's output before that
        groups = [g for g in groups if _in_order(needed, g)]
    fused = set()
    made = []
    for members in groups:
        made.append(_fused([needed[i] for i in members], [nodes[i] for i in members]))
        fused.update(members)
    _rewire(made)
    return [op for i, op in enumerate(needed) if i not in fused] + made


def _rewire(made: list) -> None:
    """The scheduler's ``waiting`` and ``users`` for the groups ``made``: a group waits for
    each argument of a member that an op outside it makes (as the member did), and is the
    user, in place of its members, of the ops and groups that make them."""
    group_of = {id(m): group for group in made for m in group.members}
    producers = {}
    for group in made:
        waiting, readers = 0, []
        for m in group.members:
            waiting += m.waiting
            for user in m.users:
                other = group_of.get(id(user))
                if other is group:
                    waiting -= 1
                else:
                    readers.append(user if other is None else other)
            for a in m.args.values():
                for r in (a if type(a) is list else (a,)):
                    if type(r) is tuple and r[0].results is None and \
                            id(r[0]) not in group_of:
                        producers[id(r[0])] = r[0]
        group.waiting = waiting
        group.users = readers
    for op in producers.values():
        op.users = [group_of.get(id(user), user) for user in op.users]


def _groups(needed: list, nodes: list) -> list:
    """Lists of positions in ``needed`` (each in record order) of the groups of two or more.

    Levels are first the lowest each op can have (over its producers, in record order), then
    raised as far as its readers allow (in reverse): an op that only feeds a group a level up
    (the gradient of a loss's last scale, read by grad ops that also read forward values)
    joins that group instead of running alone. Either way a barrier raises the level."""
    position = {id(op): i for i, op in enumerate(needed)}
    count = len(needed)
    level = [0] * count
    producers = [()] * count   # per op: [(producer position, barrier 0 or 1), ...]
    joins = []                  # (producer, reader) positions of fusable ops of one kind
    for i, op in enumerate(needed):
        node = nodes[i]
        kind = node[0] if node is not None else None
        top = 0
        edges = None
        for a in op.args.values():
            t = type(a)
            if t is tuple:
                refs = (a,)
            elif t is list:
                refs = a
            else:
                continue
            for r in refs:
                if type(r) is not tuple or r[0].results is not None:
                    continue
                j = position.get(id(r[0]))
                if j is None:
                    continue
                other = nodes[j]
                if kind is None or other is not None and other[0] != kind:
                    barrier = 1     # (into a barrier)
                else:
                    barrier = 0
                    if other is not None:
                        joins.append((j, i))
                if edges is None:
                    edges = producers[i] = []
                edges.append((j, barrier))
                if level[j] + barrier > top:
                    top = level[j] + barrier
        level[i] = top
    if not joins:
        return []
    if max(level):
        highest = [None] * count
        for i in range(count - 1, -1, -1):
            up = highest[i]
            if up is not None and up > level[i]:
                level[i] = up
            at = level[i]
            for j, barrier in producers[i]:
                up = highest[j]
                if up is None or at - barrier < up:
                    highest[j] = at - barrier
    group_of = [None] * count
    for j, i in joins:
        if level[j] != level[i]:
            continue
        mine, theirs = group_of[i], group_of[j]
        if theirs is None:
            theirs = group_of[j] = [j]
        if mine is None:
            theirs.append(i)
            group_of[i] = theirs
        elif mine is not theirs:
            small, large = (mine, theirs) if len(mine) < len(theirs) else (theirs, mine)
            large += small
            for k in small:
                group_of[k] = large
    groups, seen = [], set()
    for g in group_of:
        if g is not None and id(g) not in seen:
            seen.add(id(g))
            g.sort()
            groups.append(g)
    return groups


def _in_order(needed: list, members: list) -> bool:
    inside = {id(needed[i]) for i in members}
    last = needed[members[-1]].order
    return all(u.order > last for i in members for u in needed[i].users if id(u) not in inside)


def _held(op) -> int:
    """A bit per output slot of ``op`` that something other than the args of its readers in
    this execution holds (every bit when something holds ``op`` through a ref those args do
    not have)."""
    refs = []   # each occurrence of a ref to ``op`` in its readers' args
    users = op.users
    for user in users if len(users) < 2 else {id(u): u for u in users}.values():
        for a in user.args.values():
            t = type(a)
            if t is tuple:
                if a[0] is op:
                    refs.append(a)
            elif t is list:
                for r in a:
                    if type(r) is tuple and r[0] is op:
                        refs.append(r)
    user = a = r = None     # (no references but the ones counted)
    held = 0
    distinct = len(refs)
    if distinct == 1:
        # its occurrence in a reader's args and in ``refs``, getrefcount's argument
        if sys.getrefcount(refs[0]) != 3:
            held = 1 << refs[0][1]
    elif distinct:
        occurrences = {}
        for r in refs:
            occurrences[id(r)] = occurrences.get(id(r), 0) + 1
        distinct = len(occurrences)
        for r in refs:
            if sys.getrefcount(r) != 2 * occurrences[id(r)] + 2:    # (+ the loop variable)
                held |= 1 << r[1]
        r = None
    # ``needed``, fuse_chains' loop variable, this parameter, getrefcount's argument, each
    # producer's ``users`` entry (``waiting`` of them) and each ref tuple
    if sys.getrefcount(op) != 4 + op.waiting + distinct:
        held = -1
    return held


# ---- one group as one program ----

def _fused(members: list, nodes: list) -> FusedGroup:
    """The FusedGroup of ``members`` (in record order) with their ``nodes``."""
    index = {id(m): k for k, m in enumerate(members)}
    values = []     # per member, the operand of each output slot (None: not computed)
    inputs, input_at = [], {}
    steps, scalars = [], []
    for m, node in zip(members, nodes):
        code, outs = node[1]
        args = m.args
        local = []
        for formula, refs, given, literals in code:
            operands = []
            for where, x in refs:
                if where == "t":
                    operands.append(local[x])
                    continue
                a = args[x] if where == "s" else args["X"][x]
                if type(a) is tuple:
                    k = index.get(id(a[0]))
                    if k is not None:
                        operands.append(values[k][a[1]])
                        continue
                    key = (id(a[0]), a[1], a[2])
                else:
                    key = id(a)
                found = input_at.get(key)
                if found is None:
                    found = input_at[key] = ("in", len(inputs))
                    inputs.append(a)
                operands.append(found)
            local.append(("v", len(steps)))
            steps.append((formula, tuple(operands), len(given), literals))
            scalars += given
        mine = []
        for r in outs:
            if r is None:
                mine.append(None)
            elif r[0] == "t":
                mine.append(local[r[1]])
            else:   # (an input passed on)
                a = args[r[1]] if r[0] == "s" else args["X"][r[1]]
                if type(a) is tuple and id(a[0]) in index:
                    mine.append(values[index[id(a[0])]][a[1]])
                else:
                    key = (id(a[0]), a[1], a[2]) if type(a) is tuple else id(a)
                    found = input_at.get(key)
                    if found is None:
                        found = input_at[key] = ("in", len(inputs))
                        inputs.append(a)
                    mine.append(found)
        values.append(mine)
    outputs, output_at, stores = [], {}, []
    for m, node, mine in zip(members, nodes, values):
        stored = node[2]
        for user in m.users:
            if id(user) not in index:
                for a in user.args.values():
                    if type(a) is tuple:
                        if a[0] is m:
                            stored |= 1 << a[1]
                    elif type(a) is list:
                        for r in a:
                            if type(r) is tuple and r[0] is m:
                                stored |= 1 << r[1]
        where = []
        for n, o in enumerate(mine):
            if o is not None and stored >> n & 1:
                k = output_at.get(o)
                if k is None:
                    k = output_at[o] = len(outputs)
                    outputs.append(o)
                where.append((n, k))
        stores.append(tuple(where))
    kind = nodes[0][0]
    return FusedGroup(members, inputs, (tuple(steps), tuple(outputs)), tuple(scalars), kind[0],
                      dtypes.to_numpy(kind[1]), stores)
