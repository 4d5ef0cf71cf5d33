"""A cached lazy backward's *program* (``tape.lazy_replay``): the per-op path's kernel calls,
fused loops and gradient sums, in an order that respects their inputs, written out as one
function over a table of values.

It is made from the per-op path's own pending graph once its grad ops are deferred: the prune
walk from the leaves' gradients, the fusion groups (``tape.fusion``, found at every array size,
see ``lazy_replay``), then each op and group in turn, its inputs named by where they come from:
an earlier step's result, a gathered array (a forward op's leaf, a value a handle keeps), a
constant backward makes (the loss's seed of ones, zeros for a gradient that never arrived), a
no-need-buffer input's shape. The written-out function runs the steps, drops each value after
its last reader (backward releases values as it goes), gives the forward ops that ran their
results as the per-op path does, and adds each leaf's gradient.
"""
from __future__ import annotations

import heapq
import itertools

import numpy as np

from . import batching, fusion_steps
from .backward import set_grad
from .fusion import FusedGroup, fuse_chains
from .kernels import fused
from .pending import LazyOp, ShapeOnly, prune, read
from .variable import Variable


class Program:
    """``run(ops, arrays, entries)``: the written-out steps of one graph state."""

    __slots__ = ("run",)


class Schedule:
    """The per-op path's execution of a graph state whose ops batch (no Program for it):
    ``turns``, its kernel calls (``batching.run_ops``), over the pending ops in prune order,
    whose plans (an Accumulation's kind) are ``kinds``; made while arrays of
    ``min_elements`` joined fused groups (``fusion_steps.MIN_ELEMENTS``: tests change it)."""

    __slots__ = ("turns", "kinds", "min_elements")

    def __init__(self, turns: list, kinds: list):
        self.turns = turns
        self.kinds = kinds
        self.min_elements = fusion_steps.MIN_ELEMENTS

    def fits(self, needed: list) -> bool:
        """Whether ``needed`` are ops of the plans the turns were made for, in that order,
        with fusion as it was."""
        kinds = self.kinds
        return self.min_elements == fusion_steps.MIN_ELEMENTS and len(needed) == len(kinds) \
            and all((op.plan if op.plan is not None else op.kind) == kind
                    for op, kind in zip(needed, kinds))


rescheduled = 0     # backwards a Schedule ran (tests check reuse)


def build(attempt, targets: list, order: list, leaves: dict):
    """Run the pending graph of ``targets`` (the leaves' gradients, for the VarDescs ``order``
    of ``leaves``): by a new program kept on ``attempt`` when one can serve it exactly (it
    then sets the gradients itself: None is returned), else by the scheduler, returning the
    targets' values (and ``attempt.refuse()``, with a Schedule where the ops batch: the
    attempt's schedule, when it fits, then runs those kernel calls again)."""
    needed = prune(ref[0] for ref in targets)
    schedule = attempt.schedule
    if schedule is not None and schedule.fits(needed):
        global rescheduled
        rescheduled += 1
        batching.run_turns(needed, schedule.turns)
        return [read(ref) for ref in targets]
    steps = _in_order(needed)
    refused = steps is None or _could_batch(steps)
    if refused:
        # refused before fusing: small arrays join no loop (compiling one takes seconds), and
        # the scheduler runs the graph as the per-op path does; where its ops batch, what it
        # runs is kept, to be run again without deciding it again
        turns = [] if steps is not None else None
        kinds = None if turns is None else \
            [op.plan if op.plan is not None else op.kind for op in needed]
        steps = None    # (fusion reads the ops' reference counts: nothing else may hold them)
        batching.run_ops(needed, turns)
        attempt.refuse(Schedule(turns, kinds) if turns else None)
        return [read(ref) for ref in targets]
    steps = None
    nodes = fuse_chains(needed, small=True) if len(needed) > 1 else needed
    needed = None
    steps = _in_order(nodes)
    program = None
    if steps is not None and not _could_batch(steps):
        program = _written(attempt, steps, targets, order, leaves)
    if program is None:
        attempt.refuse()
        batching.Agenda(nodes).run()
        return [read(ref) for ref in targets]
    for node in nodes:
        node.users = None
    ops = [None] * len(attempt.entry.positions)
    at = {p: w for w, p in enumerate(attempt.entry.positions)}
    for node in nodes:
        for op in node.members if type(node) is FusedGroup else (node,):
            if type(op) is LazyOp:
                ops[at[op.record[1]]] = op
    nodes = steps = None
    attempt.entry.programs[attempt.state] = program
    program.run(ops, attempt.arrays, attempt.entries)
    return None


def _in_order(nodes: list):
    """``nodes`` in an order where each follows what it reads (record order among the ready
    ones), from the prune walk's ``waiting`` and ``users``."""
    waiting = {id(n): n.waiting for n in nodes}
    ready = [(n.order, k, n) for k, n in enumerate(nodes) if not n.waiting]
    heapq.heapify(ready)
    tie = itertools.count(len(nodes))
    done = []
    while ready:
        _, k, n = heapq.heappop(ready)
        done.append(n)
        for user in n.users:
            left = waiting[id(user)] - 1
            waiting[id(user)] = left
            if not left:
                heapq.heappush(ready, (user.order, next(tie), user))
    return done if len(done) == len(nodes) else None


def _could_batch(steps: list) -> bool:
    """Whether the scheduler could run two of ``steps`` as one batch: the same batching
    signature, neither reached from the other."""
    by_signature = {}
    for n in steps:
        sig = batching.signature(n) if n.plan is not None else (n.kind or n)
        if sig is not n:
            by_signature.setdefault(sig, []).append(n)
    position = {id(n): k for k, n in enumerate(steps)}
    for alike in by_signature.values():
        for a, b in zip(alike, alike[1:]):
            if not _reaches(a, b, position):
                return True
    return False


def _reaches(a, b, position: dict) -> bool:
    last = position[id(b)]
    stack, seen = [a], set()
    while stack:
        n = stack.pop()
        for user in n.users:
            if user is b:
                return True
            if id(user) not in seen and position[id(user)] < last:
                seen.add(id(user))
                stack.append(user)
    return False


def _written(attempt, steps: list, targets: list, order: list, leaves: dict):
    """The Program of ``steps``, or None where an input comes from somewhere a program cannot
    name."""
    gathered = {}
    for k, a in enumerate(attempt.arrays):
        gathered.setdefault(id(a), k)
    count = len(attempt.arrays)
    for k, e in enumerate(attempt.entries):
        if type(e) is Variable:
            gathered.setdefault(id(e._value), count + k)
    namespace = {"batching": batching, "fused": fused, "np": np, "Variable": Variable,
                 "set_grad": set_grad, "total_of": _total_of, "loop": _loop}
    table = {}      # id(op) -> its results' local, t<k>
    constants = {}  # id(array) -> its local
    lines = []
    uses = {}       # local -> index in ``lines`` of its last reader
    failed = []

    def value(x):
        t = type(x)
        if t is tuple:
            name = table.get(id(x[0]))
            if name is None:
                failed.append(x)
                return "None"
            uses[name] = len(lines)
            return f"{name}[{x[1]}]" + (f"[{x[2]}]" if x[2] >= 0 else "")
        if t is list:
            return f"[v for v in ({''.join(value(r) + ', ' for r in x)}) if v is not None]"
        if x is None:
            return "None"
        if t is ShapeOnly:
            name = f"S{len(namespace)}"
            namespace[name] = x
            return f"{name}.array()"
        k = gathered.get(id(x))
        if k is not None:
            return f"g[{k}]"
        made = attempt.constants.get(id(x))
        if made is None:
            failed.append(x)
            return "None"
        name = constants.get(id(x))
        if name is None:
            name = constants[id(x)] = f"c{len(constants)}"
            namespace[name + "_spec"] = made[2:]
            lines.insert(0, f"    {name} = np.{made[1]}(*{name}_spec)")
            for local in uses:
                uses[local] += 1
        uses[name] = len(lines)
        return name

    for n in steps:
        if type(n) is FusedGroup:
            k = len(namespace)
            namespace[f"P{k}"] = (n.program, n.dtype, n.shape, np.array(n.scalars, n.dtype))
            columns = ", ".join(value(x) for x in n.args["X"])
            lines.append(f"    parts = loop(P{k}, ({columns}{',' if columns else ''}))")
            for m, stores in zip(n.members, n.stores):
                if stores:
                    name = table[id(m)] = f"t{len(table)}"
                    results = [None] * (1 if m.plan is None else len(m.plan.outputs))
                    for out, part in stores:
                        results[out] = f"parts[{part}]"
                    lines.append(f"    {name} = ({''.join(f'{r}, ' for r in results)})")
            continue
        name = f"t{len(table)}"
        if n.plan is None:   # (a gradient Accumulation)
            parts = "".join(value(x) + ", " for x in n.args["X"])
            lines.append(f"    {name} = (total_of(({parts})),)")
        else:
            k = len(namespace)
            namespace[f"P{k}"], namespace[f"W{k}"] = n.plan, n.wants
            arrays = ", ".join(f"{slot!r}: {value(x)}" for slot, x in n.args.items())
            lines.append(f"    {name} = batching.invoke(P{k}, {{{arrays}}}, W{k}, None)")
        table[id(n)] = name
    if failed:
        return None
    kept = set()
    tail = []
    at = {p: w for w, p in enumerate(attempt.entry.positions)}
    for n in steps:     # the forward ops that ran keep their results, as in the per-op path
        for op in n.members if type(n) is FusedGroup else (n,):
            if type(op) is LazyOp and id(op) in table:
                kept.add(table[id(op)])
                tail += [f"    o = ops[{at[op.record[1]]}]",
                         f"    o.results = {table[id(op)]}", "    o.args = None"]
    for d in order:
        leaf = leaves[d]
        where = next((k for k, e in enumerate(attempt.entries) if e is leaf), None)
        if where is None:
            return None
        ref = targets[order.index(d)]
        uses_before = dict(uses)
        gradient = value(ref)
        uses.clear()
        uses.update(uses_before)
        kept.add(gradient.split("[")[0])
        tail += [f"    g_ = {gradient}", "    if g_ is not None:",
                 f"        set_grad(entries[{where}], g_)"]
    if failed:
        return None
    released = {}
    for local, last in uses.items():
        if local not in kept:
            released.setdefault(last, []).append(local)
    body = []
    for k, line in enumerate(lines):
        body.append(line)
        body += [f"    {local} = None" for local in released.get(k, ())]
    body = ["def run(ops, g, entries):",
            "    g = (*g, *[e._value if type(e) is Variable else None for e in entries])",
            *body, *tail]
    exec(compile("\n".join(body), "<lazy backward program>", "exec"), namespace)
    program = Program()
    program.run = namespace["run"]
    return program


def _total_of(parts: tuple):
    """An Accumulation's sum: its parts in order, a None part skipped."""
    total = None
    for value in parts:
        if value is not None:
            total = value if total is None else total + value
    return total


def _loop(spec: tuple, columns: tuple) -> list:
    """One FusedGroup's loop (``fusion.run_chains`` for a group alone): its stored outputs."""
    program, dtype, shape, scalars = spec
    flat = []
    for value in columns:
        if value is None or value.dtype != dtype or value.shape != shape:
            raise RuntimeError(f"lazy replay: a fused loop's input is "
                               f"{getattr(value, 'dtype', None)}{getattr(value, 'shape', '')}, "
                               f"its producer said {dtype}{shape}")
        flat.append(value.reshape(-1))
    size = int(np.prod(shape))
    outputs = [np.empty(size, dtype) for _ in program[1]]
    fused.run_group(program, dtype, flat, outputs, scalars)
    return [out.reshape(shape) for out in outputs]
