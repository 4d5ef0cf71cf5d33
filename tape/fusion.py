"""Fusion: a chain of pending elementwise ops runs as one numba loop (``kernels/fused.py``).

Before a lazy execution's scheduler runs (``tape.batching.run_ops``), maximal chains are found
among the pending ops it is given: CPU ops of the types in ``_FORMULAS``, all of one output
shape and floating dtype (binary ops with both inputs of that shape), each op's only output
read by exactly one op — the next of the chain — and by nothing else. "Nothing else" is checked
on the references themselves: a Variable that still holds an intermediate (the user's, or a
backward handle's that keeps it for a gradient), a request for it, or a pending op outside this
execution that reads it each hold a reference to its ref tuple or op, and any of them keeps the
op out of a chain. A chain of two or more ops becomes one ``FusedChain`` in the scheduler's set;
its last op gets the result, its intermediates are never stored.

The loop rounds every step to the dtype, so ``+ - * /``, scale, relu, square and sqrt give
numpy's results bit for bit; exp, log, tanh and sigmoid call libm's scalar functions where the
unfused kernels call numpy's vectorised ones, and may differ in the last bit. Loops are
compiled once per chain signature (the steps, their operand wiring, the dtype) and reused:
attribute values (scale's factor and bias) are arguments, not part of the signature.

On unless ``FLAGS_lazy_fusion`` is off; off while the NaN/Inf check is on, which names the op
that made a value (the unused-input check is about kernels, and a fused loop reads every
input it is given).
"""
from __future__ import annotations

import sys

import numpy as np

from . import dtypes
from .pending import LazyOp, read
from .place import CPUPlace

# op type -> (formula of kernels/formulas.py, input slots)
_FORMULAS = {
    "elementwise_add": ("add", ("X", "Y")),
    "elementwise_sub": ("subtract", ("X", "Y")),
    "elementwise_mul": ("multiply", ("X", "Y")),
    "elementwise_div": ("divide", ("X", "Y")),
    "scale": ("scaled", ("X",)),
    "relu": ("relu", ("X",)),
    "sigmoid": ("sigmoid", ("X",)),
    "tanh": ("tanh", ("X",)),
    "exp": ("exp", ("X",)),
    "log": ("log", ("X",)),
    "sqrt": ("sqrt", ("X",)),
    "square": ("square", ("X",)),
}
_DTYPES = (dtypes.FP32, dtypes.FP64)


class FusedChain(LazyOp):
    """A chain of pending ops run as one loop: to the scheduler an op (``plan`` None, like an
    Accumulation) reading the chain's outside inputs, which batches with the chains of its
    ``kind`` (``run_chains``); running it gives the chain's last op its result."""

    __slots__ = ("kind", "chain", "steps", "scalars", "shape", "dtype")

    def __init__(self, chain: list, inputs: list, steps: tuple, scalars: tuple, shape, dtype):
        super().__init__(None, {"X": inputs}, None)
        self.kind = ("fused", steps, scalars, shape, dtype)     # what batches with it
        self.order = chain[-1].order    # after all it reads, before all that reads its result
        self.chain = chain
        self.steps = steps
        self.scalars = scalars
        self.shape = shape
        self.dtype = dtype

    def run(self) -> None:
        run_chains([self])


def run_chains(chains: list) -> None:
    """Run FusedChains of one ``kind`` (steps, attribute values, shape, dtype) as one loop over
    their inputs concatenated (each element computed as one chain alone computes it); each
    chain's last op gets its part of the result."""
    from .kernels import fused
    first = chains[0]
    dtype, shape = first.dtype, first.shape
    size = int(np.prod(shape))
    inputs = []
    for k in range(len(first.args["X"])):
        column = [np.asarray(read(a) if type(a) is tuple else a, dtype).reshape(-1)
                  for a in (chain.args["X"][k] for chain in chains)]
        inputs.append(column[0] if len(column) == 1 else np.concatenate(column))
    out = np.empty(size * len(chains), dtype)
    # each value rounded to the dtype once, as numpy rounds a Python float operand
    fused.run_chain(first.steps, dtype, inputs, out, np.array(first.scalars, dtype))
    for n, chain in enumerate(chains):
        ops = chain.chain
        ops[-1].results = (out[n * size:(n + 1) * size].reshape(shape),)
        for op in ops:
            op.args = None
            op.users = None
        chain.chain = chain.args = None
        chain.results = ()


def fuse_chains(needed: list) -> list:
    """``needed`` (``pending.prune``'s answer, with ``waiting`` and ``users``) with each
    fusable chain of two or more ops replaced by one FusedChain."""
    kinds = {}      # fusable op -> (shape, dtype)
    readers = {}    # fusable op -> id of the one op that alone holds its output
    for op in needed:   # (``_sole_reader`` counts references: nothing here may hold ``op`` yet)
        kind = _kind(op)
        if kind is not None:
            reader = _sole_reader(op)
            kinds[op] = kind
            if reader is not None:
                readers[op] = reader
    if not readers:
        return needed
    by_id = {id(op): op for op in kinds}
    following = {}
    has_previous = set()    # (a chain is a line: of two ops read only by one, one joins it)
    for op, reader in readers.items():
        user = by_id.get(reader)
        if user is not None and kinds[user] == kinds[op] and user not in has_previous:
            following[op] = user
            has_previous.add(user)
    if not following:
        return needed
    fused = set()
    chains = []
    for op in following:
        if op in has_previous:
            continue
        chain = [op]
        while chain[-1] in following:
            chain.append(following[chain[-1]])
        chains.append(_fused(chain, kinds[op]))
        fused.update(chain)
    return [op for op in needed if op not in fused] + chains


def _kind(op):
    """(shape, dtype) of a fusable op's output, else None."""
    plan = op.plan
    if plan is None or op.wants is not None or op.dests is not None or op.batch is not None:
        return None
    fixed = _plan_kinds.get(plan, _UNKNOWN)
    if fixed is _UNKNOWN:
        fixed = _plan_kind(plan)
    if fixed is None:
        return None
    kind, slots, numpy_dtype = fixed
    args = op.args
    for slot in slots:      # (ScaleTensor and BiasTensor: the scale op refuses them)
        a = args[slot]
        t = type(a)
        if t is tuple:
            d = a[0].plan
            if d is None or a[2] >= 0:
                return None
            out = _plan_kinds.get(d, _UNKNOWN)
            if out is _UNKNOWN:
                out = _plan_kind(d)
            out = _output_kind(d, a[1]) if out is None else out[0] if a[1] == 0 else None
            if out != kind:
                return None
        elif t is not np.ndarray or a.shape != kind[0] or a.dtype != numpy_dtype:
            return None
    return kind


_UNKNOWN = object()
_plan_kinds: dict = {}  # plan -> ((shape, dtype), input slots, numpy dtype), None if not fusable


def _plan_kind(plan):
    """What of ``_kind`` its plan fixes (computed once per plan)."""
    if len(_plan_kinds) >= 4096:
        _plan_kinds.clear()
    fixed = None
    entry = _FORMULAS.get(plan.info.type)
    if entry is not None and type(plan.place) is CPUPlace and len(plan.outputs) == 1:
        kind = _output_kind(plan, 0)
        if kind is not None:
            fixed = (kind, entry[1], dtypes.to_numpy(kind[1]))
    _plan_kinds[plan] = fixed
    return fixed


def _output_kind(plan, n: int):
    """(shape, dtype) of output slot ``n`` of ``plan`` when it is one floating array of known,
    non-empty shape."""
    specs = plan.outputs[n][2]
    if not specs or len(specs) != 1:
        return None
    shape, dtype = specs[0]
    if dtype not in _DTYPES or not shape or -1 in shape:
        return None
    return shape, dtype


def _sole_reader(op):
    """The id of the one op that reads ``op``'s output, once, if nothing else holds it (else
    None): the ref tuple in that op's arguments is held by those arguments alone, and ``op`` only
    by that tuple, the execution's list and its producers' ``users`` entries (a Variable still
    holding the output, a backward handle keeping it, a request for it or a pending op outside
    this execution reading it all add a reference)."""
    users = op.users
    if len(users) != 1:
        return None
    user = users[0]
    ref = None
    for a in user.args.values():
        t = type(a)
        if t is tuple:
            if a[0] is op:
                if ref is not None:
                    return None     # (read twice)
                ref = a
        elif t is list:
            for r in a:
                if type(r) is tuple and r[0] is op:
                    return None     # (a list slot: not fused)
    a = r = None    # (the loop's last values: no extra references to count)
    if ref is None:
        return None
    # the user's args dict, ``ref``, getrefcount's argument
    if sys.getrefcount(ref) != 3:
        return None
    del ref
    # the execution's list, fuse_chains' loop variable, this parameter, getrefcount's
    # argument, and each producer's ``users`` entry (``waiting`` of them)
    if sys.getrefcount(op) != 5 + op.waiting:
        return None
    return id(user)


def _fused(chain: list, kind) -> FusedChain:
    shape, dtype = kind
    members = set(chain)
    inputs, steps, scalars = [], [], []
    previous = None
    for op in chain:
        formula, slots = _FORMULAS[op.plan.info.type]
        operands = []
        for slot in slots:
            a = op.args[slot]
            if type(a) is tuple and a[0] is previous:
                operands.append("v")
            else:
                operands.append(len(inputs))
                inputs.append(a)
        count, literals = 0, ()
        if formula == "scaled":
            attrs = op.plan.attrs
            factor, bias, mode = _scale_scalars(attrs["scale"], attrs["bias"],
                                                attrs["bias_after_scale"])
            scalars += factor, bias
            count, literals = 2, (mode,)
        steps.append((formula, tuple(operands), count, literals))
        previous = op
    fused = FusedChain(chain, inputs, tuple(steps), tuple(scalars), shape,
                       dtypes.to_numpy(dtype))     # (the values cast to the dtype when run)
    waiting = 0
    for a in inputs:
        if type(a) is tuple and a[0].results is None:
            users = a[0].users
            for k, user in enumerate(users):
                if user in members:
                    users[k] = fused
                    break
            waiting += 1
    fused.waiting = waiting
    fused.users = chain[-1].users
    return fused


def _scale_scalars(scale: float, bias: float, bias_after_scale: bool) -> tuple:
    """(factor, bias, mode) of ``formulas.scaled``, as ``kernels/cpu/math.scale`` computes."""
    if bias == 0.0:
        return scale, 0.0, 0
    if not bias_after_scale:
        bias *= scale
    return scale, bias, 1 if scale == 1.0 else 2
