"""Lazy execution: ops recorded after ``infer``, their kernels run when a value is asked for.

A lazy runner (``tape.runner`` with ``lazy=True``) checks an op's inputs and infers its
CallPlan exactly as an eager one does, so a bad shape or attribute is reported at the user's
line; instead of invoking the kernel it makes a ``LazyOp`` and leaves the outputs pending on it.
A pending Variable has no ``_value``; its ``_lazy`` is a *ref* ``(op, output slot index, index
in the slot or -1)``. A LazyOp's ``args`` hold, per input slot, the array when the input was
computed at record time, else the ref of the op it waits for (a later in-place write to the
same Variable does not change what the op reads).

Asking for a value (``Variable.value()`` and the other readers, an eager op reading a pending
input, ``backward``) runs ``compute``: seed 000's prune walk from the targets over the pending
ops they depend on, then those ops in an order the scheduler picks (``tape.batching``, which
may run several as one kernel call). An op that ran keeps its results (``results``) and drops
its ``args``; a Variable that reads its value keeps it and drops its ref, so a value lives as
long as a Variable or a pending op that reads it, as in eager mode. Nothing holds a LazyOp but
the Variables and ops that wait for it: one nobody can ask for is freed unrun. (What backward
needs of an op that ran, its tape holds: ``tape.units``.)
"""
from __future__ import annotations

import gc
import itertools

import numpy as np

from .grad_replay import shape_only
from .runner_checks import no_value

order = itertools.count()     # a LazyOp's place in record order: next(order)


class LazyOp:
    """One recorded, not yet run op: its CallPlan, its inputs (arrays or refs) by slot, its
    place in record order, and, once run, ``results`` (one entry per output slot, as
    ``dispatch.invoke`` returns them). An op that ran in a batch of ``n`` shares the batch's
    whole results; ``batch`` is then ``(n, summed output slots)`` and ``row`` its place in the
    batch, and ``read`` cuts its part out when asked (most parts are never cut: a later batch
    takes their rows from the whole at once, ``tape.batching``)."""

    # ``sig``, ``waiting`` and ``users``: the scheduler's, while an execution runs it;
    # ``unit``: a weak reference to the kernel call it ran in, as backward sees it
    # (``tape.batched_backward``);
    # ``record``: ``(list, index)``, where the unit goes for its tape's backward
    __slots__ = ("plan", "args", "results", "order", "names", "sig", "waiting", "users",
                 "batch", "row", "unit", "record")
    wants = None        # the output slots to compute (None: all); a grad op names them
    shapes = None       # {(slot index, index): shape} of outputs its plan has no specs for
    dests = None        # per output slot, where a grad op's outputs go (tape.lazy_backward)

    def __init__(self, plan, args: dict, names):
        self.plan = plan
        self.args = args
        self.results = None
        self.batch = None
        self.unit = self.record = None
        self.users = None
        self.order = next(order)
        self.names = names      # output slot -> names, for the NaN/Inf check's message

    def __repr__(self):
        state = "ran" if self.results is not None else "pending"
        what = self.plan.info.type if self.plan is not None else "accumulation"
        return f"{type(self).__name__}({what}, {state})"


def pending_ref(info, name: str, v):
    """A lazy runner's input ``v`` that holds no value: the ref it is pending on (an error if
    it is pending on nothing)."""
    ref = getattr(v, "_lazy", None)     # (a slot eager Variables never set)
    if ref is None:
        raise no_value(info, name, v.desc)
    if ref[0].results is not None:      # ran already: read the value as an eager op would
        value = v._value = read(ref)
        v._lazy = None
        return value
    return ref


def pending_value(info, name: str, v):
    """An eager runner's input ``v`` that holds no value: computed now if it is pending."""
    if getattr(v, "_lazy", None) is None:
        raise no_value(info, name, v.desc)
    return settle(v)


def is_pending(v) -> bool:
    """Whether Variable ``v`` waits for a lazy op to run."""
    return v._value is None and getattr(v, "_lazy", None) is not None


def settle(v):
    """Compute pending Variable ``v`` (running what it needs), keep the value, drop the ref."""
    ref = v._lazy
    value = compute([ref])[0]
    v._value = value
    v._lazy = None
    return value


def settle_all(variables) -> None:
    """Compute every pending Variable among ``variables`` in one execution (so that ops of the
    same signature among them can run together)."""
    pending = [v for v in variables if is_pending(v)]
    if pending:
        values = compute([v._lazy for v in pending])
        for v, value in zip(pending, values):
            v._value = value
            v._lazy = None


def read(ref):
    """The value of ``ref``, whose op has run."""
    op, n, j = ref
    result = op.results[n]
    if op.batch is not None:
        return part_of(op, result, n, j)
    return result if j < 0 else result[j]


def part_of(op, result, n: int, j: int):
    """Op ``op``'s part of its batch's output slot ``n`` (``result``; index ``j`` of it if it
    is a list): its rows along axis 0 (a view), or, for an output the batch summed, the whole
    sum for the batch's first op and None for the others."""
    if result is None:
        return None
    size, sums, offsets, stacked = op.batch
    row = op.row
    if n in sums:
        if row:
            return None
        return result if j < 0 else result[j]
    value = result if j < 0 else result[j]
    if value is None:
        return None
    if offsets is not None:
        return value[offsets[row]:offsets[row + 1]]
    if stacked:
        return value[row, ...]      # (a 0-D view where each op's value is 0-D)
    rows = value.shape[0] // size
    return value[row * rows:(row + 1) * rows]


def row_index(offsets: list, rows: list):
    """The indices along axis 0 of op places ``rows`` of a batch whose ops' rows start at
    ``offsets``."""
    return np.concatenate([np.arange(offsets[r], offsets[r + 1]) for r in rows])


def compute(refs: list) -> list:
    """The values of ``refs``: the prune walk collects the pending ops they depend on, the
    scheduler runs them, and each ref is read."""
    with collector_paused():
        needed = prune(ref[0] for ref in refs)
        if needed:
            from .batching import run_ops
            try:
                run_ops(needed)
            except BaseException:
                for op in needed:   # (unmarked for the next walk: ``users`` marks the walk's)
                    op.users = None
                raise
    return [read(ref) for ref in refs]


class collector_paused:
    """Python's cycle collector off inside the block (``with collector_paused():``). Executing
    (or deferring a backward of) a large lazy graph makes many small objects, none in a cycle;
    each collection would walk every live op and value, and on a Tree-LSTM of 16 trees that
    cost four times the work (2.2 s against 0.44 s). A class, not a generator context manager:
    every lazy block and every value asked for enters one."""

    __slots__ = ("collecting",)

    def __enter__(self) -> None:
        self.collecting = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self.collecting:
            gc.enable()



def prune(ops) -> list:
    """The pending ops among ``ops`` and everything they depend on that has not run (in no
    particular order: ``tape.batching`` orders them): seed 000's prune walk (keep an op that
    is a target or produces what a kept op reads) over the graph of refs, with a stack
    instead of recursion. The walk leaves on each kept op what the scheduler needs:
    ``waiting`` (how many of its arguments are outputs of kept ops) and ``users`` (the kept
    op of each such argument: an op read twice by one user lists it twice, and is counted
    twice in its ``waiting``); ``users`` is None on every op outside a walk and its
    execution, so it also marks the ops this walk has reached."""
    needed, stack = [], []
    for op in ops:
        if op.results is None and op.users is None:
            op.users = []
            stack.append(op)
    keep, push, pop = needed.append, stack.append, stack.pop
    while stack:
        op = pop()
        keep(op)
        waiting = 0
        inputs = op.args.values()
        while inputs is not None:
            lists = None    # (a slot's list of inputs: walked next, as more inputs)
            for a in inputs:
                t = type(a)
                if t is tuple:      # (no tuple made per input: most are one ref)
                    d = a[0]
                    if d.results is None:
                        waiting += 1
                        users = d.users
                        if users is None:
                            d.users = [op]
                            push(d)
                        else:
                            users.append(op)
                elif t is list:
                    lists = a if lists is None else lists + a
            inputs = lists
        op.waiting = waiting
    return needed


class ShapeOnly:
    """An argument whose shape and dtype alone the kernel reads (a no-need-buffer input)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype: int):
        self.shape = shape
        self.dtype = dtype

    def array(self):
        return shape_only(self.shape, self.dtype)

    def stacked(self, n: int) -> ShapeOnly:
        """The argument of a batch of ``n`` ops that each read this one, along axis 0."""
        return ShapeOnly((self.shape[0] * n,) + self.shape[1:], self.dtype)


def arrays_of(op) -> dict:
    """The kernel's input arrays of ``op``, whose inputs have all run (a gradient part that
    a batch summed into another op's part reads as None and is left out of a list)."""
    arrays = {}
    for slot, a in op.args.items():
        t = type(a)
        if t is list:
            values = [read(r) if type(r) is tuple else r.array() if type(r) is ShapeOnly
                      else r for r in a]
            arrays[slot] = [v for v in values if v is not None]
        elif t is tuple:
            # (``read`` written out: a frame per input of every op run alone costs)
            d, n, j = a
            result = d.results[n]
            if d.batch is None:
                arrays[slot] = result if j < 0 else result[j]
            else:
                arrays[slot] = part_of(d, result, n, j)
        elif t is ShapeOnly:
            arrays[slot] = a.array()
        else:
            arrays[slot] = a
    return arrays
