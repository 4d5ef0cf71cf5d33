"""Fusion: a group of pending elementwise ops, forward or grad, runs as one numba loop
(``kernels/fused.py``).

Before a lazy execution's scheduler runs (``tape.batching.run_ops``), groups are found among
the pending ops it is given. An op can join one if it is a CPU op of ``_EXPRESSIONS`` (forward
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
which values are stored, the dtype) and reused across iterations: attribute values (scale's
factor and bias) are arguments, not part of the signature. Identical groups batch into one call.

On unless ``FLAGS_lazy_fusion`` is off; off while the NaN/Inf check is on, which names the op
that made a value.
"""
from __future__ import annotations

import operator
import sys

import numpy as np

from . import dtypes
from . import flags as _flags
from .dispatch import invoke
from .pending import LazyOp, ShapeOnly, arrays_of, read
from .place import CPUPlace


def _f(formula: str, *operands, scalars=(), literals=()) -> tuple:
    return (formula, operands, scalars, literals)


_D = "Out@GRAD"
# op type -> per output slot, the expression of its value: an input slot's name (that input's
# value itself: elementwise_add_grad passes Out@GRAD on), or (formula of kernels/formulas.py,
# operand expressions, scalar arguments, literal arguments). Each is what the op's CPU kernel
# computes, in its order of operations (sqrt_grad: ``dOut * 0.5 / Out``).
_EXPRESSIONS = {
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
_LIBM = {"exp", "log", "tanh", "sigmoid"}
_DTYPES = (dtypes.FP32, dtypes.FP64)
_record_order = operator.attrgetter("order")


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


def fuse_chains(needed: list) -> list:
    """``needed`` (``pending.prune``'s answer, with ``waiting`` and ``users``) with each group
    of two or more fusable ops replaced by one FusedGroup."""
    needed.sort(key=_record_order)      # (a topological order: an op is made after its inputs)
    nodes = []
    found = False
    for op in needed:   # (``_held`` counts references: nothing here may hold an op yet)
        node = _node(op)
        if node is not None:
            kind, expressions, libm = node
            held = _held(op)
            if libm and (held or len(op.users) != 1):
                node = None     # (see _LIBM)
            else:
                found = True
                node = (kind, expressions, held)
        nodes.append(node)
    op = None
    if not found:
        return needed
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
    producers = [None] * count  # per op: [(producer position, barrier 0 or 1, joins), ...]
    for i, op in enumerate(needed):
        node = nodes[i]
        kind = node[0] if node is not None else None
        top = 0
        edges = []
        for a in op.args.values():
            for r in (a if type(a) is list else (a,)):
                if type(r) is not tuple or r[0].results is not None:
                    continue
                j = position.get(id(r[0]))
                if j is None:
                    continue
                other = nodes[j]
                if kind is None or other is not None and other[0] != kind:
                    edges.append((j, 1, False))     # (into a barrier)
                    at = level[j] + 1
                else:
                    edges.append((j, 0, other is not None))
                    at = level[j]
                if at > top:
                    top = at
        level[i] = top
        producers[i] = edges
    highest = [None] * count
    for i in range(count - 1, -1, -1):
        up = highest[i]
        if up is not None and up > level[i]:
            level[i] = up
        at = level[i]
        for j, barrier, _ in producers[i]:
            up = highest[j]
            if up is None or at - barrier < up:
                highest[j] = at - barrier
    group_of = [None] * count
    for i in range(count):
        for j, _, joins in producers[i]:
            if not joins or level[j] != level[i]:
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


# ---- which ops can join, and what each computes ----

_UNKNOWN = object()
_templates: dict = {}   # plan -> (expressions, slots they read, fixed output kind), or None


def _node(op):
    """``((shape, dtype), expressions per output slot, whether it calls libm)`` of a fusable
    op, else None."""
    plan = op.plan
    if plan is None:
        return _accumulation_node(op)
    template = _templates.get(plan, _UNKNOWN)
    if template is _UNKNOWN:
        template = _template(plan, op.wants)
    if template is None:
        return None
    expressions, leaves, kind = template
    shapes = op.shapes
    if shapes is not None:      # a grad op: its plan has no output specs
        kind = None
        for n, e in enumerate(expressions):
            if e is not None:
                shape = shapes.get((n, -1))
                if shape is None or kind is not None and shape != kind[0]:
                    return None
                kind = (shape, plan.dtype)
        if not _valid(kind):
            return None
    elif kind is None:
        return None
    shape = kind[0]
    numpy_dtype = dtypes.to_numpy(kind[1])
    for slot, a in op.args.items():     # (those not read too: no broadcasting anywhere)
        t = type(a)
        if t is tuple:
            if _kind_of(a) != kind:
                return None
        elif t is np.ndarray:
            if a.shape != shape or a.dtype != numpy_dtype:
                return None
        elif t is ShapeOnly and slot not in leaves:
            if a.shape != shape:
                return None
        elif a is not None:
            return None     # (ScaleTensor, BiasTensor: the scale op refuses them)
    return kind, expressions, plan.info.type in _LIBM


def _template(plan, wants):
    """What of ``_node`` its plan fixes (computed once per plan)."""
    if len(_templates) >= 4096:
        _templates.clear()
    template = None
    kind = plan.info.type
    expressions = _EXPRESSIONS.get(kind)
    if kind == "scale":
        attrs = plan.attrs
        factor, bias, mode = _scale_scalars(attrs["scale"], attrs["bias"],
                                            attrs["bias_after_scale"])
        expressions = (_f("scaled", "X", scalars=(factor, bias), literals=(mode,)),)
    if expressions is not None and type(plan.place) is CPUPlace:
        if wants is not None:
            expressions = tuple(e if name in wants else None
                                for e, name in zip(expressions, plan.info.output_names))
        leaves = set()
        for e in expressions:
            _leaves(e, leaves)
        if leaves:
            template = (expressions, leaves, _fixed_kind(plan))
    _templates[plan] = template
    return template


def _leaves(e, into: set) -> None:
    if type(e) is str:
        into.add(e)
    elif e is not None:
        for o in e[1]:
            _leaves(o, into)


def _fixed_kind(plan):
    """(shape, dtype) of a forward plan's one output from its specs (None for a grad plan,
    whose ops carry their shapes)."""
    if len(plan.outputs) != 1 or not plan.outputs[0][2]:
        return None
    kind = _spec_kind(plan, 0)
    return kind if _valid(kind) else None


def _spec_kind(plan, n: int):
    specs = plan.outputs[n][2]
    if not specs or len(specs) != 1:
        return None
    return specs[0]


def _valid(kind) -> bool:
    """Whether a fused loop handles (shape, dtype): a floating array of known, non-empty
    shape."""
    return kind is not None and kind[1] in _DTYPES and bool(kind[0]) and -1 not in kind[0]


def _kind_of(ref):
    """(shape, dtype) of the op output ``ref`` refers to (None if unknown, or a part a batch
    summed into another op's part)."""
    op, n, j = ref
    if j >= 0 or op.batch is not None and n in op.batch[1]:
        return None
    shapes, plan = op.shapes, op.plan
    if shapes is None:
        return _spec_kind(plan, n) if plan is not None else None
    if plan is not None:
        return (shapes.get((n, -1)), plan.dtype)
    return (shapes.get((n, -1)), op.kind[3]) if op.kind is not None else None


_sums: dict = {}


def _accumulation_node(op):
    """An Accumulation's node: its parts added in arrival order, as it adds them."""
    kind = op.kind
    if kind is None or kind[0] != "accumulation" or kind[4] is not np:
        return None
    kind = (kind[2], kind[3])
    if not _valid(kind):
        return None
    shape, numpy_dtype = kind[0], dtypes.to_numpy(kind[1])
    parts = op.args["X"]
    for a in parts:
        t = type(a)
        if t is tuple:
            if _kind_of(a) != kind:
                return None
        elif t is not np.ndarray or a.shape != shape or a.dtype != numpy_dtype:
            return None
    count = len(parts)
    expression = _sums.get(count)
    if expression is None:
        expression = 0
        for k in range(1, count):
            expression = _f("add", expression, k)
        expression = _sums[count] = (expression,)
    return kind, expression, False


def _held(op) -> int:
    """A bit per output slot of ``op`` that something other than the args of its readers in
    this execution holds (every bit when something holds ``op`` through a ref those args do
    not have)."""
    refs, counts, seen = [], [], []
    for user in op.users:
        if user in seen:
            continue
        seen.append(user)
        for a in user.args.values():
            for r in (a if type(a) is list else (a,)):
                if type(r) is tuple and r[0] is op:
                    for k, known in enumerate(refs):
                        if known is r:
                            counts[k] += 1
                            break
                    else:
                        refs.append(r)
                        counts.append(1)
    user = a = r = known = seen = None     # (no references but the ones counted)
    held = 0
    for k in range(len(refs)):
        # its occurrences in readers' args, ``refs``, getrefcount's argument
        if sys.getrefcount(refs[k]) != counts[k] + 2:
            held |= 1 << refs[k][1]
    # ``needed``, fuse_chains' loop variable, this parameter, getrefcount's argument, each
    # producer's ``users`` entry (``waiting`` of them) and each ref tuple
    if sys.getrefcount(op) != 4 + op.waiting + len(refs):
        held = -1
    return held


# ---- one group as one program ----

def _fused(members: list, nodes: list) -> FusedGroup:
    """The FusedGroup of ``members`` (in record order) with their ``nodes``."""
    inside = {id(m) for m in members}
    values = {}     # (id(member), output slot) -> operand
    inputs, input_at = [], {}
    steps, scalars = [], []

    def operand(a):
        if type(a) is tuple:
            key = (id(a[0]), a[1])
            found = values.get(key)
            if found is not None:
                return found
        else:
            key = id(a)
        found = input_at.get(key)
        if found is None:
            found = input_at[key] = ("in", len(inputs))
            inputs.append(a)
        return found

    def emit(e, args):
        if type(e) is str:
            return operand(args[e])
        if type(e) is int:
            return operand(args["X"][e])
        formula, operands, given, literals = e
        operands = tuple(emit(o, args) for o in operands)
        steps.append((formula, operands, len(given), literals))
        scalars.extend(given)
        return ("v", len(steps) - 1)

    for m, node in zip(members, nodes):
        for n, e in enumerate(node[1]):
            if e is not None:
                values[(id(m), n)] = emit(e, m.args)
    outputs, output_at, stores = [], {}, []
    for m, node in zip(members, nodes):
        stored = node[2]
        for user in m.users:
            if id(user) not in inside:
                for a in user.args.values():
                    for r in (a if type(a) is list else (a,)):
                        if type(r) is tuple and r[0] is m:
                            stored |= 1 << r[1]
        where = []
        for n, e in enumerate(node[1]):
            if e is not None and stored >> n & 1:
                o = values[(id(m), n)]
                k = output_at.get(o)
                if k is None:
                    k = output_at[o] = len(outputs)
                    outputs.append(o)
                where.append((n, k))
        stores.append(tuple(where))
    kind = nodes[0][0]
    return FusedGroup(members, inputs, (tuple(steps), tuple(outputs)), tuple(scalars), kind[0],
                      dtypes.to_numpy(kind[1]), stores)


def _scale_scalars(scale: float, bias: float, bias_after_scale: bool) -> tuple:
    """(factor, bias, mode) of ``formulas.scaled``, as ``kernels/cpu/math.scale`` computes."""
    if bias == 0.0:
        return scale, 0.0, 0
    if not bias_after_scale:
        bias *= scale
    return scale, bias, 1 if scale == 1.0 else 2
