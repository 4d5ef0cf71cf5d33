"""Plan: what an Executor runs for one (program, feeds, fetches, targets), worked out once.

Preparing a run copies and prunes the program and looks up each kept op's attributes, kernels
and where its outputs go; a training loop asks for the same run every step. A Plan keeps that
work, and a note of every op and variable it was made from, so that it is reused only while the
program is unchanged: an op added, removed or edited in place (its slots or attributes) or a
variable redeclared makes a new plan.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..desc import DENSE_TENSOR, DENSE_TENSOR_ARRAY, OpDesc, VarDesc
from ..dispatch import CallPlan, infer, invoke
from ..errors import InvalidArgumentError, NotFoundError, TapeError
from ..ops.rules import fmt
from ..registry import load_kernels, op_info
from .program import (
    EMPTY_VAR,
    FEED_HOLDER,
    FETCH_HOLDER,
    copy_desc,
    ensure_holder,
    feed_op,
    next_col,
    proto_attrs,
)
from .prune import fetch_target, flatten, mark_targets, prune_marked

# Where an op's output goes: nowhere (an EMPTY_VAR placeholder), the scope of the block's run,
# the persistable scope, the fetch holder, or (a sub-block writing a variable of an enclosing
# block) the nearest scope that has it.
_NOWHERE, _LOCAL, _SCOPE, _FETCH, _OUTER = range(5)
_CALLS_LIMIT = 4096     # distinct input shapes remembered per op


def plan_key(desc, feed_names, fetch_names, targets) -> tuple:
    """What picks a plan: the program object and the names and targets of the run."""
    return (id(desc), tuple(feed_names), tuple(fetch_names),
            tuple(t if isinstance(t, str) else id(t) for t in flatten(targets)))


class Plan:
    """Block 0 of ``desc`` pruned to ``fetch_names`` and ``targets``, with a feed op for each of
    ``feed_names``, as ``steps`` ready to run on ``place``."""

    def __init__(self, desc, feed_names, fetch_names, targets, place):
        self.desc, self.targets = desc, list(flatten(targets))   # held: their ids are the key
        self._made_from = _copied(_note(desc))
        program, block = _pruned(desc, feed_names, fetch_names, targets)
        self.block = block
        self.feeds = [(op.attrs["col"], op.output("Out")[0]) for op in block.ops
                      if op.type == "feed"]
        self.fetch_cols = {op.input("X")[0]: op.attrs["col"] for op in block.ops
                           if op.type == "fetch"}
        self.steps, needed = block_steps(program, block, place)
        # a tensor array a run reads before writing starts empty, as in Paddle
        self.arrays = [n for n, _, _ in needed if block.vars[n].type == DENSE_TENSOR_ARRAY]
        self.from_scope = [entry for entry in needed if entry[0] not in self.arrays]

    def current(self, desc) -> bool:
        """Whether ``desc`` is still the program this plan was made from, unchanged."""
        return desc is self.desc and _note(desc) == self._made_from

    def feed_values(self, feed: dict, place) -> dict:
        """``{col: array on place}`` for the plan's feed ops, each checked against its VarDesc."""
        fed = {}
        for col, name in self.feeds:
            if name not in feed:
                raise NotFoundError(f"Executor.run: the program needs a value for '{name}' "
                                    f"(feed col {col}), but feed has {sorted(feed) or 'nothing'}")
            fed[col] = place.put(_checked_feed(self.block.vars[name], feed[name]))
        return fed

    def take_from_scope(self, scope, place) -> None:
        """Check that the scope holds every value the plan reads but neither feeds nor computes,
        and put those values on ``place`` (where the scope then keeps them)."""
        for name, i, op_type in self.from_scope:
            v = scope.find_var(name)
            if v is None or v.value is None:
                raise NotFoundError(
                    f"Executor.run: op #{i} ({op_type}) reads '{name}', which has no value: "
                    f"it is not fed, not computed by an earlier op and not in the scope")
            v.value = place.put(v.value)


class Step:
    """One op of a plan: its attributes, input names, output routing and, by input shapes and
    dtypes, its CallPlans (``tape.dispatch``)."""

    __slots__ = ("index", "op", "info", "attrs", "inputs", "outputs", "declared", "wants",
                 "calls")

    def __init__(self, index: int, op: OpDesc, info, block, program=None):
        self.index, self.op, self.info = index, op, info
        self.attrs = proto_attrs(info, op)
        self.inputs = [(s.name, op.inputs[s.name], s.duplicable) for s in info.inputs
                       if op.inputs.get(s.name)]
        self.outputs = [(slot.duplicable, [(n, route(program, block, op, n))
                                           for n in op.outputs.get(slot.name, ())])
                        for slot in info.outputs]
        self.declared = {slot: [d for d in (var_desc(program, block, n) for n in names) if d]
                         for slot, names in op.outputs.items()}
        self.wants = {s for s, names in op.outputs.items() if any(n != EMPTY_VAR for n in names)}
        # Input shapes and dtypes the shape rule accepted -> the CallPlan. An op whose rule
        # depends on more than its inputs (load_combine) has a cache that never remembers.
        self.calls = type(info.plans)()

    def run(self, place, scope, local) -> None:
        """Read the inputs from ``local`` (and its parents), infer (once per input shapes and
        dtypes), invoke the kernel and store the outputs where they go."""
        op = self.op
        arrays, key = {}, []
        for slot, names, duplicable in self.inputs:
            try:
                values = [local.find_var(n).value for n in names]
            except AttributeError:
                raise unset(self, local, names) from None
            arrays[slot] = values if duplicable else values[0]
            if op.type != "feed":
                for v in values:
                    key.append(v.shape)
                    key.append(v.dtype)
        if op.type == "feed":   # its kernel's dtype is the fed value's
            key.append(arrays["X"][self.attrs["col"]].dtype)
        plan = self.calls.get(key := tuple(key))
        if plan is None:
            if len(self.calls) >= _CALLS_LIMIT:
                self.calls.clear()
            plan = self.calls[key] = self._infer(arrays, place)
        result = invoke(plan, arrays, self.wants, op.outputs)
        for (duplicable, where), value in zip(self.outputs, result):
            if not where or value is None:
                continue
            for (name, to), v in zip(where, value if duplicable else (value,)):
                if v is None or to is _NOWHERE:
                    continue
                if to is _FETCH:
                    local.find_var(FETCH_HOLDER).value[self.attrs["col"]] = v
                else:
                    store(to, name, v, scope, local)

    def _infer(self, arrays: dict, place) -> CallPlan:
        """The CallPlan for the VarDescs of ``arrays``; a feed op's kernel takes the fed
        value's dtype."""
        if self.op.type == "feed":
            dtype = dtypes.from_numpy(arrays["X"][self.attrs["col"]].dtype)
            return CallPlan(self.info, self.attrs, None, place, dtype)
        descs = {}
        for slot, names, duplicable in self.inputs:
            values = arrays[slot] if duplicable else (arrays[slot],)
            descs[slot] = [VarDesc(n, v.shape, dtypes.from_numpy(v.dtype))
                           for n, v in zip(names, values)]
        try:
            return infer(self.info, self.attrs, None, descs, place, declared=self.declared)
        except TapeError as e:
            raise type(e)(f"Executor.run: op #{self.index}: {e}") from None


def _pruned(desc, feed_names, fetch_names, targets):
    """A pruned copy of block 0: feed ops for every fed variable, the fetch ops of
    ``fetch_names`` and ``targets`` marked as the only targets."""
    work = copy_desc(desc)
    block = work.global_block()
    for name in [*feed_names, *fetch_names]:
        if name not in block.vars:
            kind = "feed" if name in feed_names else "fetch"
            raise NotFoundError(f"Executor.run: {kind} '{name}' names no variable of the "
                                f"program (it declares {_some(block.vars)})")
    for op in block.ops:
        op.is_target = False
    mark_targets(desc.global_block(), block, targets or [])
    for name in fetch_names:
        fetch_target(block, name).is_target = True
    fed_by_op = {op.output("Out")[0] for op in block.ops if op.type == "feed"}
    new_feeds = [n for n in feed_names if n not in fed_by_op]
    if new_feeds:
        ensure_holder(block, "feed")
        col = next_col(block, "feed")
        block.ops[:0] = [feed_op(n, col + i) for i, n in enumerate(new_feeds)]
    prune_marked(work, block)
    return work, block


# Ops the Executor runs itself, on the scope (``tape.static.control_flow``): op type -> a class
# made like Step with the program and place too, whose ``run`` takes Step.run's arguments.
RUNNERS: dict = {}


def block_steps(program, block, place) -> tuple[list, list]:
    """The Steps of ``block``'s ops (a sub-block's too, prepared with it), and ``[(name, op
    index, op type)]`` of the values they read that no feed or earlier op of the block
    provides. Checks first that every op has a kernel on ``place`` (or is run by the Executor)
    and writes only declared variables."""
    available, needed, steps = {FEED_HOLDER, FETCH_HOLDER}, [], []
    load_kernels(place)
    for i, op in enumerate(block.ops):
        info = op_info(op.type)
        runner = RUNNERS.get(op.type)
        if runner is None and not any(p == place.key for p, _ in info.kernels):
            raise NotFoundError(f"Executor.run: op #{i} ({op.type}) has no kernel on {place}")
        for name in op.input_arg_names():
            if name not in available and name != EMPTY_VAR:
                needed.append((name, i, op.type))
                available.add(name)
        for name in op.output_arg_names():
            if name != EMPTY_VAR and var_desc(program, block, name) is None:
                raise NotFoundError(f"Executor.run: block {block.idx}, op #{i} ({op.type}) "
                                    f"writes '{name}', which the program does not declare")
            available.add(name)
        steps.append(Step(i, op, info, block, program) if runner is None else
                     runner(i, op, info, block, program, place))
    return steps, needed


def var_desc(program, block, name: str) -> VarDesc | None:
    """The VarDesc of ``name`` in ``block`` or the nearest enclosing block that declares it."""
    while True:
        d = block.vars.get(name)
        if d is not None or program is None or block.parent_idx < 0:
            return d
        block = program.blocks[block.parent_idx]


def route(program, block, op: OpDesc, name: str) -> int:
    """Where ``op`` of ``block`` stores its output ``name`` (the _NOWHERE... codes)."""
    if name == EMPTY_VAR:
        return _NOWHERE
    if op.type == "fetch":
        return _FETCH
    d = block.vars.get(name)
    if d is None:
        return _OUTER if var_desc(program, block, name) is not None else _LOCAL
    return _SCOPE if d.persistable else _LOCAL


def store(to: int, name: str, value, scope, local) -> None:
    """Put ``value`` where ``route`` said ``name`` goes (not the fetch holder)."""
    if to is _LOCAL:
        local.var(name).value = value
    elif to is _SCOPE:
        (scope.find_var(name) or scope.var(name)).value = value
    elif to is _OUTER:
        (local.find_var(name) or local.var(name)).value = value


def unset(step, local, names) -> NotFoundError:
    """The error for an op reading a variable that holds no value in this run."""
    missing = [n for n in names if local.find_var(n) is None or local.find_var(n).value is None]
    return NotFoundError(f"Executor.run: op #{step.index} ({step.op.type}) reads "
                         f"{missing or names}, which no earlier op wrote in this run")


def _checked_feed(desc: VarDesc, value):
    """``value`` as an array (a device array as it is), if its dtype and shape fit ``desc``
    (-1 dims match any size)."""
    array = value if hasattr(value, "__cuda_array_interface__") else np.asarray(value)
    if desc.type != DENSE_TENSOR:
        return array
    try:
        dtype = dtypes.from_numpy(array.dtype)
    except KeyError:
        dtype = None
    shape = array.shape
    fits = len(shape) == len(desc.shape) and all(d in (-1, n) for d, n in zip(desc.shape, shape))
    if dtype != desc.dtype or not fits:
        raise InvalidArgumentError(
            f"Executor.run: feed '{desc.name}' is {array.dtype} {fmt(shape)}, but the program "
            f"declares {dtypes.name(desc.dtype)} {fmt(desc.shape)} (-1: any size)")
    return array


def _some(names, limit: int = 8) -> str:
    names = sorted(names)
    return ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit
                                       else "")


def _note(desc) -> list:
    """Every op of ``desc`` (the object, its type, slots and attributes) and every variable of
    block 0 (the object and what a run reads of it): live, to compare with an earlier
    ``_copied`` note and tell whether ``desc`` changed since."""
    return [len(desc.blocks),
            [(op, op.type, op.inputs, op.outputs, op.attrs) for b in desc.blocks for op in b.ops],
            [(n, d, d.shape, d.dtype, d.persistable, d.type)
             for n, d in desc.global_block().vars.items()]]


def _copied(note: list) -> list:
    blocks, ops, variables = note
    return [blocks, [(op, t, {k: list(v) for k, v in i.items()},
                      {k: list(v) for k, v in o.items()}, dict(a)) for op, t, i, o, a in ops],
            variables]
