"""Prune: the part of a program that its targets need (the seed design's algorithm).

A target is an op (marked ``is_target``) or a variable (fetched by a ``fetch`` op that becomes a
target). Walking the block in reverse, an op is kept if it is a target or writes a variable that
a kept op reads; a kept op's inputs, and everything its sub-blocks read, become needed in turn.
One refinement, as in Paddle: an optimizer op (``op_role`` with the optimize bit) writes the
parameters that the forward ops read, so it is kept only as a target, never for what it writes;
otherwise running a checkpoint would also run the update.
"""
from __future__ import annotations

from ..attribute import BLOCK, BLOCKS
from ..desc import OpDesc
from ..errors import InvalidArgumentError, NotFoundError
from ..registry import REGISTRY
from .program import (
    OP_ROLE,
    OPTIMIZE,
    Program,
    copy_desc,
    declared,
    desc_of,
    ensure_holder,
    fetch_op,
    next_col,
)


def prune(program, targets, block_id: int = 0):
    """A copy of ``program`` holding only the ops of block ``block_id`` that ``targets`` need,
    and only the variables those ops use. ``program`` is not changed.

    ``targets``: ops of that block (OpDescs, matched by identity) and variables (names, or
    objects with a ``.name``), possibly in nested lists; ops already marked ``is_target`` count
    too. A Program gives a Program sharing its scope, a ProgramDesc a ProgramDesc.
    """
    desc = desc_of(program)
    pruned = copy_desc(desc)
    block = pruned.block(block_id)
    mark_targets(desc.block(block_id), block, targets)
    prune_marked(pruned, block)
    if isinstance(program, Program):
        return Program(pruned, program.scope)
    return pruned


def prune_marked(program, block) -> None:
    """Prune ``block`` of ``program`` in place to what its ``is_target`` ops need. The
    sub-blocks of the kept ops stay whole, with every variable they use; pruning block 0
    empties the sub-blocks no kept op runs any more (their indices stay)."""
    keep, needed = _walk(program, block)
    block.ops = [op for op, k in zip(block.ops, keep) if k]
    used = set(needed)
    for op in block.ops:
        used.update(op.output_arg_names())
    reachable = _nested(program, [i for op in block.ops for i in _sub_blocks(op)])
    for i in reachable:
        for op in program.blocks[i].ops:
            used.update(op.input_arg_names() + op.output_arg_names())
    block.vars = {n: d for n, d in block.vars.items() if n in used}
    if block.idx == 0:
        for orphan in set(range(1, len(program.blocks))) - reachable:
            program.blocks[orphan].ops, program.blocks[orphan].vars = [], {}


def mark_targets(original, block, targets) -> None:
    """Mark ``targets`` in ``block`` (a copy of ``original``): ops by their position in
    ``original``, variables through their fetch op (appended when none fetches them yet)."""
    positions = {id(op): i for i, op in enumerate(original.ops)}
    for target in flatten(targets):
        if isinstance(target, OpDesc):
            i = positions.get(id(target))
            if i is None:
                raise NotFoundError(f"prune: target op {target.type} is not an op of block "
                                    f"{original.idx}")
            block.ops[i].is_target = True
            continue
        name = target if isinstance(target, str) else getattr(target, "name", None)
        if not isinstance(name, str):
            raise InvalidArgumentError(f"prune: a target must be an OpDesc or a variable (or its "
                                       f"name), received {type(target).__name__}")
        fetch_target(block, name).is_target = True


def fetch_target(block, name: str) -> OpDesc:
    """The fetch op of variable ``name`` in ``block``, appended (with the next free col) if none
    fetches it yet."""
    declared(block, name)
    for op in block.ops:
        if op.type == "fetch" and op.input("X") == [name]:
            return op
    ensure_holder(block, "fetch")
    return block.append_op(fetch_op(name, next_col(block, "fetch")))


def flatten(targets):
    """The targets of possibly nested lists, in order."""
    if isinstance(targets, (list, tuple)):
        for t in targets:
            yield from flatten(t)
    else:
        yield targets


def _walk(program, block):
    """(keep flag per op, names the kept ops need) by the reverse walk."""
    needed: set[str] = set()
    keep = [False] * len(block.ops)
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        role = op.attrs.get(OP_ROLE, 0)
        optimizer = isinstance(role, int) and role & OPTIMIZE
        if op.is_target or (not optimizer and not needed.isdisjoint(op.output_arg_names())):
            keep[i] = True
            needed.update(op.input_arg_names())
            for sub in _sub_blocks(op):
                needed.update(_reads(program, sub))
    return keep, needed


def _sub_blocks(op: OpDesc) -> list[int]:
    """The indices of the blocks that ``op``'s BLOCK / BLOCKS attributes name."""
    info = REGISTRY.get(op.type)
    found = []
    for name, value in op.attrs.items():
        kind = (op.attr_types or {}).get(name)
        if kind is None and info is not None and name in info.attrs:
            kind = info.attrs[name].type
        if kind == BLOCK:
            found.append(value)
        elif kind == BLOCKS:
            found.extend(value)
    return found


def _reads(program, idx: int) -> set[str]:
    """Every name the ops of block ``idx`` and of its nested sub-blocks read."""
    return {n for i in _nested(program, [idx]) for op in program.blocks[i].ops
            for n in op.input_arg_names()}


def _nested(program, todo: list) -> set[int]:
    """The blocks ``todo`` and every block their ops' sub-block attributes name, nested."""
    seen = set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        if not isinstance(i, int) or not 0 <= i < len(program.blocks):
            raise NotFoundError(f"prune: a sub-block attribute names block {i}, but the "
                                f"program has {len(program.blocks)} blocks")
        seen.add(i)
        for op in program.blocks[i].ops:
            todo.extend(_sub_blocks(op))
    return seen
