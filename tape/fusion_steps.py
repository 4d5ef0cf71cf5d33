"""What each fusable op computes, as steps of a fused loop (``tape.fusion``).

An op's *node* says what it contributes to a group: the (shape, dtype) every one of its inputs
and outputs has, and its *template*, fixed per CallPlan (or per number of parts, for a gradient
``Accumulation``): the steps it adds to the loop — ``(formula, operand refs, scalar values,
literals)``, an operand ref being ``("s", slot)`` (the op's input in that slot), ``("x", k)``
(part ``k`` of an Accumulation) or ``("t", k)`` (the op's own step ``k``) — and per output
slot the ref of its value (None where the op does not compute it).
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes
from .pending import ShapeOnly
from .place import CPUPlace


def _f(formula: str, *operands, scalars=(), literals=()) -> tuple:
    return (formula, operands, scalars, literals)


_D = "Out@GRAD"
# op type -> per output slot, the expression of its value: an input slot's name (that input's
# value itself: elementwise_add_grad passes Out@GRAD on), or (formula of kernels/formulas.py,
# operand expressions, scalar arguments, literal arguments). Each is what the op's CPU kernel
# computes, in its order of operations (sqrt_grad: ``dOut * 0.5 / Out``).
EXPRESSIONS = {
    "elementwise_add": (_f("add", "X", "Y"),),
    "elementwise_sub": (_f("subtract", "X", "Y"),),
    "elementwise_mul": (_f("multiply", "X", "Y"),),
    "elementwise_div": (_f("divide", "X", "Y"),),
    **{t: (_f(t, "X"),) for t in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square")},
    **{t: (_f(t, "Out", _D),) for t in ("relu_grad", "sigmoid_grad", "tanh_grad")},
    "square_grad": (_f("square_grad", "X", _D),),
    "exp_grad": (_f("multiply", _D, "Out"),),
    "log_grad": (_f("divide", _D, "X"),),
    "sqrt_grad": (_f("divide", _f("scaled", _D, scalars=(0.5, 0.0), literals=(0,)), "Out"),),
    "elementwise_add_grad": (_D, _D),
    "elementwise_sub_grad": (_D, _f("negative", _D)),
    "elementwise_mul_grad": (_f("multiply", _D, "Y"), _f("multiply", _D, "X")),
    "elementwise_div_grad": (_f("divide", _D, "Y"),
                             _f("divide", _f("multiply", _f("negative", _D), "Out"), "Y")),
}
# The forward ops whose loop step calls libm where the unfused kernel calls numpy's
# vectorised function (the two may differ in the last bit). Such an op joins a group only where
# its value is private, as in a chain: read by one op, held by nothing else. A value anything
# else can see, and so every forward value a gradient reads (sigmoid_grad reads Out), is
# numpy's, as eager Tape computes it: training an LSTM lazily gives eager's gradients bit for
# bit.
LIBM = frozenset({"exp", "log", "tanh", "sigmoid"})
# Below this many elements per array an op joins no group: finding the groups costs about 3.5
# µs of Python per pending op, more than the kernel calls a loop saves on small arrays
# (``benchmarks/lazy_fusion.py``: fusion breaks even near 8,192 float32 elements, is 1.1-1.2×
# at 16,384 and 9-21× at 262,144). Tests set it to 0.
MIN_ELEMENTS = 8192
_DTYPES = (dtypes.FP32, dtypes.FP64)
_UNKNOWN = object()
# plan -> (template, slots its steps read, output (shape, dtype) or None for a grad plan,
# wanted output slot indices, calls libm), or None if its op cannot join
_plans: dict = {}
_output_kinds: dict = {}    # forward plan -> (shape, dtype) or None per output slot
_sums: dict = {}            # number of parts -> an Accumulation's template


def node(op, small: bool = False):
    """``((shape, dtype), template, whether it calls libm)`` of an op that can join a group,
    else None. ``small``: below MIN_ELEMENTS too, where the groups are found once for many
    executions (``tape.lazy_replay``), apart from the ops that call libm (so that results
    stay those of the default path)."""
    plan = op.plan
    if plan is None:
        return _accumulation_node(op, small)
    fixed = _plans.get(plan, _UNKNOWN)
    if fixed is _UNKNOWN:
        fixed = _plan_node(plan, op.wants)
    if fixed is None:
        return None
    template, leaves, kind, wanted, libm = fixed
    shapes = op.shapes
    if shapes is not None:      # a grad op: its plan has no output specs
        shape = shapes.get((wanted[0], -1))
        for n in wanted[1:]:
            if shapes.get((n, -1)) != shape:
                return None
        kind = (shape, plan.dtype)
        if not valid(kind):
            return None
    elif kind is None:
        return None
    shape = kind[0]
    if _size(shape) < MIN_ELEMENTS and (not small or libm):
        return None
    numpy_dtype = dtypes.to_numpy(kind[1])
    for slot, a in op.args.items():     # (those not read too: no broadcasting anywhere)
        t = type(a)
        if t is tuple:
            if kind_of(a) != kind:
                return None
        elif t is np.ndarray:
            if a.shape != shape or a.dtype != numpy_dtype:
                return None
        elif t is ShapeOnly and slot not in leaves:
            if a.shape != shape:
                return None
        elif a is not None:
            return None     # (ScaleTensor, BiasTensor: the scale op refuses them)
    return kind, template, libm


def may_join(needed: list, nodes: list) -> bool:
    """Whether a fusable op of ``needed`` reads one of them of its kind (``nodes``, per op):
    without such an edge ``fusion._groups`` finds no group, so its pass over every op (most of a
    hand-batched LM step's ~1,000 ops, for the few large ones that may fuse) is skipped."""
    kinds = {id(op): node[0] for op, node in zip(needed, nodes) if node is not None}
    for op, node in zip(needed, nodes):
        if node is None:
            continue
        kind = node[0]
        for a in op.args.values():
            for r in (a,) if type(a) is tuple else a if type(a) is list else ():
                if type(r) is tuple and kinds.get(id(r[0])) == kind:
                    return True
    return False


def _plan_node(plan, wants):
    """What of ``node`` its plan fixes (computed once per plan)."""
    if len(_plans) >= 4096:
        _plans.clear()
    fixed = None
    kind = plan.info.type
    expressions = EXPRESSIONS.get(kind)
    if kind == "scale":
        attrs = plan.attrs
        factor, bias, mode = _scale_scalars(attrs["scale"], attrs["bias"],
                                            attrs["bias_after_scale"])
        expressions = (_f("scaled", "X", scalars=(factor, bias), literals=(mode,)),)
    if expressions is not None and type(plan.place) is CPUPlace:
        if wants is not None:
            expressions = tuple(e if name in wants else None
                                for e, name in zip(expressions, plan.info.output_names))
        wanted = tuple(n for n, e in enumerate(expressions) if e is not None)
        template = _flatten(expressions)
        leaves = {r[1] for step in template[0] for r in step[1] if r[0] == "s"} | \
            {r[1] for r in template[1] if r is not None and r[0] == "s"}
        output = None
        if plan.specs:
            output = _output_kinds_of(plan)[0] if len(plan.outputs) == 1 else None
            output = output if valid(output) else None
        if wanted and (output is not None or not plan.specs):
            fixed = (template, leaves, output, wanted, kind in LIBM)
    _plans[plan] = fixed
    return fixed


def _flatten(expressions: tuple) -> tuple:
    """``(steps, output refs)`` of per-output expressions (see the module docstring)."""
    steps = []

    def ref(e):
        if type(e) is str:
            return ("s", e)
        if type(e) is int:
            return ("x", e)
        formula, operands, scalars, literals = e
        refs = tuple(ref(o) for o in operands)
        steps.append((formula, refs, scalars, literals))
        return ("t", len(steps) - 1)
    outputs = tuple(None if e is None else ref(e) for e in expressions)
    return tuple(steps), outputs


def _output_kinds_of(plan) -> tuple:
    kinds = _output_kinds.get(plan)
    if kinds is None:
        if len(_output_kinds) >= 4096:
            _output_kinds.clear()
        kinds = _output_kinds[plan] = tuple(
            specs[0] if specs and len(specs) == 1 else None
            for _, _, specs, _ in plan.outputs)
    return kinds


_sizes: dict = {}


def _size(shape: tuple) -> int:
    size = _sizes.get(shape)
    if size is None:
        if len(_sizes) >= 4096:
            _sizes.clear()
        size = _sizes[shape] = math.prod(shape)
    return size


def valid(kind) -> bool:
    """Whether a fused loop handles (shape, dtype): a floating array of known, non-empty
    shape."""
    return kind is not None and kind[1] in _DTYPES and bool(kind[0]) and -1 not in kind[0]


def kind_of(ref):
    """(shape, dtype) of the op output ``ref`` refers to (None if unknown, or a part a batch
    summed into another op's part)."""
    op, n, j = ref
    if op.batch is not None and n in op.batch[1]:
        return None
    shapes, plan = op.shapes, op.plan
    if shapes is None:
        if plan is None:
            return None
        if j < 0:
            return _output_kinds_of(plan)[n]
        specs = plan.outputs[n][2]     # (one of a list: split's outputs)
        return specs[j] if specs and j < len(specs) else None
    if plan is not None:
        return (shapes.get((n, j)), plan.dtype)
    return (shapes.get((n, j)), op.kind[3]) if op.kind is not None else None


def _accumulation_node(op, small: bool):
    """An Accumulation's node: its parts added in arrival order, as it adds them."""
    kind = op.kind
    if kind is None or kind[0] != "accumulation" or kind[4] is not np:
        return None
    kind = (kind[2], kind[3])
    if not valid(kind) or _size(kind[0]) < MIN_ELEMENTS and not small:
        return None
    shape, numpy_dtype = kind[0], dtypes.to_numpy(kind[1])
    parts = op.args["X"]
    for a in parts:
        t = type(a)
        if t is tuple:
            if kind_of(a) != kind:
                return None
        elif t is not np.ndarray or a.shape != shape or a.dtype != numpy_dtype:
            return None
    count = len(parts)
    template = _sums.get(count)
    if template is None:
        expression = 0
        for k in range(1, count):
            expression = _f("add", expression, k)
        template = _sums[count] = _flatten((expression,))
    return kind, template, False


def _scale_scalars(scale: float, bias: float, bias_after_scale: bool) -> tuple:
    """(factor, bias, mode) of ``formulas.scaled``, as ``kernels/cpu/math.scale`` computes:
    the add left out only for a -0.0 bias (x + 0.0 turns -0.0 into +0.0)."""
    if bias == 0.0 and math.copysign(1.0, bias) < 0.0:
        return scale, 0.0, 0
    if not bias_after_scale:
        return scale, bias, 3
    return scale, bias, 1 if scale == 1.0 else 2
