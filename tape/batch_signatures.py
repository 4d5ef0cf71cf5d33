"""What lazy ops batched together share, their *signature* (``tape.batching``'s agenda groups
ready ops by it), and what the agenda reads of each op's plan in one lookup: the signature
where the plan fixes it, the batch rule (``tape.batch_rules``), and whether the plan's ops
could join a fused chain (``tape.fusion``), so that an execution none of whose ops could
skips the search for chains.
"""
from __future__ import annotations

from . import fusion_steps
from .batch_rules import rule_of
from .pending import ShapeOnly

# plan -> (its ops' signature, or None where it depends on the shared inputs; batch rule;
# whether its ops can join a fused chain, under ``fusion_steps.MIN_ELEMENTS`` of the last
# item): what the agenda reads of an op's plan, in one lookup
plan_entries: dict = {}


def accumulation_may_fuse(op, min_elements: int) -> bool:
    """Whether an Accumulation could join a fused chain: an output of ``min_elements`` or
    more elements (or of a shape it does not know)."""
    shapes = op.shapes
    if shapes is None:
        return True
    for shape in shapes.values():
        if shape is None:
            return True
        size = 1
        for n in shape:
            size *= n
        if size >= min_elements or size < 0:
            return True
    return False


def plan_entry(op, min_elements: int) -> tuple:
    """``plan_entries``' entry for ``op``'s plan (made once per plan, and again if
    ``fusion_steps.MIN_ELEMENTS`` changed). Whether an op can join a chain
    (``fusion_steps.node``) follows from its plan: op type, attributes, input and output
    shapes and dtypes, and for a grad op the wanted outputs and their shapes, which its
    forward op's plan fixes."""
    plan = op.plan
    rule = rule_of(op)
    sig = None if rule is None or rule[2] else rule[3]
    if len(plan_entries) >= 4096:
        plan_entries.clear()
    entry = plan_entries[plan] = (sig, rule, fusion_steps.node(op) is not None, min_elements)
    return entry


def signature(op):
    """What ops batched together must share: the plan and the identity of the shared inputs;
    an op without a batch rule gets a signature of its own."""
    rule = rule_of(op) if op.plan is not None else None
    if rule is None:
        return op
    return shared_signature(op, rule) if rule[2] else rule[3]


def shared_signature(op, rule) -> tuple:
    _, sums, shared, key = rule
    args = op.args
    if len(shared) == 1 and not sums:   # (most: one weight, bias or table)
        return (key, _identity(args[shared[0]]))
    sig = (key, *[_identity(args[slot]) for slot in shared])
    if sums:    # a summed output's parts must all go to one variable
        dests = op.dests
        sig += tuple(dests[n] for n in sums)
    return sig


def _identity(a):
    """Which value an argument is: the array itself, or the op output it refers to (the arrays
    and ops are alive while the batch is scheduled, so their ids are stable)."""
    if type(a) is tuple:
        return (id(a[0]), a[1], a[2])
    if type(a) is list:
        return tuple(_identity(x) for x in a)
    if type(a) is ShapeOnly:    # only its shape counts, and the plan fixes that
        return None
    return id(a)
