"""Batch rules of lazy execution's autobatching (``tape.batching``): per op type, which inputs a
batch concatenates along axis 0 and which it passes once (shared), decided once per CallPlan.

An op is batched only where row ``i`` of every output depends on row ``i`` of the concatenated
inputs alone, so cutting the result gives each op what it would have computed alone. A grad
op follows its forward op's rule; the gradient of a shared input is summed over the batch.
"""
from __future__ import annotations

from . import dtypes
from .desc import GRAD_SUFFIX
from .dispatch import CallPlan
from .registry import op_info

# How a batch passes an input: concatenated on axis 0, once (every op reads the same one), or
# stacked on a new axis 0 (STACK: a reduction over axis 0 or over everything runs as the same
# reduction past that axis, concat and split along axis 0 along axis 1, a traced function's op
# as a call of the function on every call's arguments at once, ``stacked_plan``); and
# an output: cut back along axis 0 (or the new axis), or (SUM, a shared input's gradient) the
# whole, which is the sum of every op's part, given to the first op (the others' parts read as
# None; they all go to the same variable, where gradient parts are summed anyway).
CAT, SHARED, STACK, SUM = "cat", "shared", "stack", "sum"


# ---- batch rules: per op type, from its plan and its inputs' shapes (``{slot: [shape]}``),
# ``{input slot: CAT or SHARED}``, or None where the op cannot be batched ----

def _all_cat(plan, shapes):
    """Every input concatenated (ops computing each element from the same element of every
    input), if each has an axis 0."""
    if all(len(s) >= 1 for ss in shapes.values() for s in ss):
        return {slot: CAT for slot in shapes}
    return None


def _elementwise_binary(plan, shapes):
    (x,), (y,) = shapes["X"], shapes["Y"]
    if x == y and len(x) >= 1:
        return {"X": CAT, "Y": CAT}
    axis = plan.attrs.get("axis", -1)
    start = len(x) - len(y) if axis == -1 else axis
    if start > 0 and len(x) >= 1:           # Y (a bias) broadcasts over X's axis 0: shared
        return {"X": CAT, "Y": SHARED}
    return None


def _mul(plan, shapes):
    if plan.attrs["x_num_col_dims"] >= 1:
        return {"X": CAT, "Y": SHARED}
    return None


def _matmul(plan, shapes):
    (x,), (y,) = shapes["X"], shapes["Y"]
    if len(x) >= 2 and len(y) == 2 and not plan.attrs["trans_x"]:
        return {"X": CAT, "Y": SHARED}
    return None


def _off_axis_0(axis: int, rank: int) -> bool:
    return rank >= 1 and axis % rank != 0


def _along_axis(plan, shapes):
    """Ops that work along their ``axis`` attribute and nowhere else (concat, split, softmax,
    softmax_with_cross_entropy and their grads): batched when that axis is not axis 0 and no
    attribute comes as a tensor."""
    rank = max(len(s) for ss in shapes.values() for s in ss)
    if all("Tensor" not in slot for slot in shapes) and _off_axis_0(plan.attrs["axis"], rank):
        return {slot: CAT for slot in shapes}
    return None


def _slice(plan, shapes):
    (x,) = shapes["Input"]
    if set(shapes) == {"Input"} and len(x) >= 1 and \
            all(a % len(x) != 0 for a in plan.attrs["axes"]):
        return {"Input": CAT}
    return None


def _reduce(plan, shapes):
    """Off axis 0, rows reduce alone: concatenated. Over axis 0 or everything (the mean of
    each sample's loss), X is stacked and the reduction runs past the new axis."""
    (x,) = shapes["X"]
    if not x:
        return None
    dims = plan.attrs["dim"]
    if plan.attrs["reduce_all"] or not dims or len(x) < 2 or any(d % len(x) == 0
                                                                 for d in dims):
        return {"X": STACK}
    return {"X": CAT}


def _mean(plan, shapes):
    (x,) = shapes["X"]
    return {"X": STACK} if x else None


def _concat_split(plan, shapes):
    """concat and split: off axis 0 as ``_along_axis``. Along axis 0 (a sequence's steps cut
    from one array, or its outputs joined into one) X is stacked on a new axis 0 and the op
    runs along axis 1 (``stacked``): each op's output is its block of the stacked result."""
    if set(shapes) == {"X"} and all(len(s) >= 1 for s in shapes["X"]) and \
            plan.attrs["axis"] % len(shapes["X"][0]) == 0:
        return {"X": STACK}
    return _along_axis(plan, shapes)


def stacked(arrays: dict, ins: dict, plan, n: int):
    """``plan``'s ``stacked_plan`` for ``n`` ops whose STACK inputs ``arrays`` (by slot: an
    array, or a list of them: concat's) are concatenated along axis 0; each such input is
    made ``n`` blocks along a new axis 0 in ``arrays``, in place."""
    rank = None
    for slot, how in ins.items():
        if how == STACK:
            x = arrays[slot]
            if type(x) is list:
                arrays[slot] = [a.reshape((n, a.shape[0] // n) + a.shape[1:]) for a in x]
                rank = x[0].ndim
            else:
                arrays[slot] = x.reshape((n, x.shape[0] // n) + x.shape[1:])
                rank = x.ndim
    return stacked_plan(plan, n, rank)


_stacked_plans: dict = {}
# op types whose kernels take inputs stacked on a new axis 0 as they are, with the same
# attributes (a traced function's op: ``tape.function_stacking``)
_self_stacking: set = set()


def stacked_op(info, attrs: dict, x_rank: int) -> tuple:
    """``(info, checked attributes, their key)`` of the op that runs ops of ``info`` with
    ``attrs`` (of X of rank ``x_rank``) on their inputs stacked along a new axis 0: a
    reduction the same (``mean`` as ``reduce_mean``) over the same axes shifted by one, never
    axis 0; concat and split along ``axis`` shifted by one; a self-stacking op as it is."""
    attrs = dict(attrs)
    if info.type in ("concat", "split"):
        attrs["axis"] = attrs["axis"] % x_rank + 1
    elif info.type not in _self_stacking:
        if info.type == "mean":
            info, attrs = op_info("reduce_mean"), {"keep_dim": False}
            axes = range(x_rank)
        else:
            dims = attrs["dim"]
            axes = range(x_rank) if attrs["reduce_all"] or not dims else \
                sorted(d % x_rank for d in dims)
        attrs.update(dim=[a + 1 for a in axes], reduce_all=False)
    return (info, *info.checked_attrs(attrs))


def stacked_plan(plan, n: int, x_rank: int):
    """The CallPlan that runs ``n`` ops of ``plan`` (of X of rank ``x_rank``) on their inputs
    stacked along a new axis 0 (``stacked_op``). Each output is ``(n,) +`` each op's output
    shape."""
    key = (plan, n)
    made = _stacked_plans.get(key)
    if made is not None:
        return made
    info, attrs, attrs_key = stacked_op(plan.info, plan.attrs, x_rank)
    specs = {slot: [((n,) + tuple(shape), dtype) for shape, dtype in ss]
             for slot, _, ss, _ in plan.outputs if ss}
    made = CallPlan(info, attrs, attrs_key, plan.place, plan.dtype, specs, plan.wants_grad)
    if len(_stacked_plans) >= 4096:
        _stacked_plans.clear()
    _stacked_plans[key] = made
    return made


def _lookup(plan, shapes):
    (ids,) = shapes["Ids"]
    return {"W": SHARED, "Ids": CAT} if len(ids) >= 1 else None


_ELEMENTWISE = ("relu", "tanh", "sigmoid", "exp", "log", "sqrt", "square", "abs", "scale",
                "gelu", "leaky_relu", "softplus", "clip", "cast", "assign", "pow", "sum")
# (a batched Y that broadcasts over X runs stacked: ``tape.function_stacking``)
ELEMENTWISE_BINARY = ("elementwise_add", "elementwise_sub", "elementwise_mul",
                      "elementwise_div", "elementwise_max", "elementwise_min", "elementwise_pow")

_RULES = {
    **{t: _all_cat for t in _ELEMENTWISE},
    **{t: _elementwise_binary for t in ELEMENTWISE_BINARY},
    "mul": _mul,
    "matmul_v2": _matmul,
    **{t: _concat_split for t in ("concat", "split")},
    **{t: _along_axis for t in ("softmax", "log_softmax", "softmax_with_cross_entropy")},
    "slice": _slice,
    "reduce_sum": _reduce,
    "reduce_mean": _reduce,
    "reduce_max": _reduce,
    "reduce_min": _reduce,
    "mean": _mean,
    "lookup_table_v2": _lookup,
}


def rule_for(op_type: str):
    """The batch rule of ``op_type`` (``rule(plan, {slot: [shape]})``, see above), or None."""
    return _RULES.get(op_type)


def add_rule(op_type: str, rule, self_stacking: bool = False) -> None:
    """Give ``op_type``, registered after import (a traced function's op, ``tape.function``),
    batch rule ``rule``; its grad op follows it as any grad op follows its forward op's. With
    ``self_stacking``, its kernel also takes inputs its rule stacks, as they come
    (``stacked_op``)."""
    _RULES[op_type] = rule
    if self_stacking:
        _self_stacking.add(op_type)


def drop_rule(op_type: str) -> None:
    """Forget ``op_type``'s rule (``add_rule``'s; its op is gone)."""
    _RULES.pop(op_type, None)
    _self_stacking.discard(op_type)


rule_cache: dict = {}


def rule_of(op):
    """``(input modes, summed output slot indices, shared input slots, key)`` for batches of
    ``op``'s plan, or None: decided once per plan (which fixes the inputs' shapes). ``key`` is
    what the ops of a batch must share besides their shared inputs: for a forward op, its
    plan apart from the batch axis (op type, attributes, place, kernel dtype, each input's
    shape past axis 0 where it is concatenated and whole where shared, dtypes, which inputs
    want gradients), so that ops reading 1 and 3 rows batch together; for a grad op, its plan.
    A grad op ``<t>_grad`` follows ``<t>``'s rule: the forward slots it reads are passed as
    ``<t>`` passes them, output gradients are concatenated, and the gradient of a shared input
    is summed."""
    plan = op.plan
    try:
        return rule_cache[plan]
    except KeyError:
        pass
    info = plan.info
    specs = {slot: [_spec(x) for x in a] if type(a) is list else [_spec(a)]
             for slot, a in op.args.items() if a is not None}
    shapes = {slot: [s[0] for s in ss] for slot, ss in specs.items()}
    rule = None
    if not any(s is None for ss in shapes.values() for s in ss):
        make = _RULES.get(info.type)
        forward = _RULES.get(info.type[:-len("_grad")]) if info.type.endswith("_grad") else None
        if make is not None:
            ins = make(plan, shapes)
            if ins is not None:
                rule = (ins, (), _shared_slots(ins), _batch_key(plan, specs, ins))
        elif forward is not None:
            ins = forward(plan, {s: v for s, v in shapes.items() if "@" not in s})
            if ins is not None and STACK not in ins.values():   # (stacked: forward ops only)
                ins = {**ins, **{s: CAT for s in shapes if "@" in s}}
                sums = tuple(n for n, name in enumerate(info.output_names)
                             if ins.get(name[:-len(GRAD_SUFFIX)]) == SHARED)
                rule = (ins, sums, _shared_slots(ins), plan)
    if len(rule_cache) >= 4096:
        rule_cache.clear()
    rule_cache[plan] = rule
    return rule


def _shared_slots(ins: dict) -> tuple:
    return tuple(slot for slot, how in ins.items() if how == SHARED)


_keys: dict = {}


def _batch_key(plan, specs: dict, ins: dict):
    """A forward plan apart from its inputs' batch axis (``rule_of``'s ``key``): the first
    plan seen with that description, which hashes as fast as a plan (the scheduler looks
    signatures up once per op)."""
    if plan.attrs_key is None:
        return plan
    inputs = tuple((slot, tuple((shape[1:] if ins.get(slot) == CAT else shape, dtype)
                                for shape, dtype in specs[slot]))
                   for slot in sorted(specs))
    described = (plan.info.type, plan.attrs_key, plan.place, plan.dtype, inputs,
                 tuple(sorted(plan.wants_grad.items())))
    if len(_keys) >= 4096:
        _keys.clear()
    return _keys.setdefault(described, plan)


def _spec(a):
    """``(shape, dtype)`` of a LazyOp's argument: an array's, or the shape rule's answer for
    the op output it refers to (shape None where no rule answered: a temporary between grad
    ops)."""
    if type(a) is tuple:
        op, n, j = a
        if op.shapes is not None:
            return op.shapes.get((n, j)), None
        return op.plan.outputs[n][2][max(j, 0)]
    dtype = a.dtype     # (a ShapeOnly's is a VarType code already)
    return tuple(a.shape), dtype if type(dtype) is int else dtypes.from_numpy(dtype)
