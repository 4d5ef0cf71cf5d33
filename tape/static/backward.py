"""Static backward: grad ops appended to a program, from the grad makers the eager tape uses.

``append_backward(program, loss)`` walks the ops that lead to ``loss`` in reverse, as the eager
tape does, but writes grad OpDescs instead of running kernels: ``loss@GRAD`` is seeded by a
``fill_constant`` of ones; a variable read by several ops gets one renamed partial gradient per
reader (``x@GRAD@RENAME@0``, ...) and a ``sum`` op before its gradient is used; a required output
gradient that never arrives is made by ``fill_zeros_like`` (an optional one, a dispensable grad
op input, is left out). ``append_optimizer_ops`` adds gradient clipping and one update op per
parameter.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..desc import OpDesc, VarDesc
from ..errors import InvalidArgumentError, NotFoundError, PreconditionNotMetError
from ..grad_steps import FWD_IN, FWD_OUT, IN_GRAD, META_IN, META_OUT, OUT_GRAD, TEMP, grad_steps
from ..ops.rules import fmt
from ..place import host_array
from ..registry import REGISTRY, grad_name, op_info
from ..variable import new_variable, unique_name
from .control_flow_grad import BLOCK_GRADS, add_block_grad
from .program import (
    BACKWARD,
    EMPTY_VAR,
    HOLDER_OPS,
    LOSS,
    OP_ROLE,
    OPTIMIZE,
    Program,
    declared,
    desc_of,
    infer_op_shapes,
    new_op,
    proto_attrs,
)
from .trace import ProgramBuilder, recording


def append_backward(program, loss) -> list[tuple[str, str]]:
    """Append to block 0 of ``program`` the grad ops of ``loss`` (a scalar-like variable, or its
    name) with respect to every variable with ``stop_gradient=False`` that it depends on.

    Returns ``[(parameter name, gradient name)]`` for the trainable parameters (persistable,
    ``stop_gradient=False``) that get a gradient. Appending again for the same loss changes
    nothing and returns the same pairs.
    """
    block = desc_of(program).global_block()
    loss_name = loss if isinstance(loss, str) else loss.name
    loss_desc = declared(block, loss_name)
    if grad_name(loss_name) in block.vars:
        return _params_grads(block, set(block.vars))
    end = max((i for i, op in enumerate(block.ops)
               if op.type not in HOLDER_OPS and loss_name in op.output_arg_names()),
              default=None)
    if end is None:
        raise NotFoundError(f"append_backward: no op of the program computes the loss "
                            f"'{loss_name}'")
    forward = block.ops[:end + 1]
    requires = _requires_grad(block, forward)
    builder = _GradBuilder(block)
    n_ops, declared_vars = len(block.ops), dict(block.vars)
    n_blocks = len(desc_of(program).blocks)
    try:    # all or nothing: a failure leaves the program as it was
        builder.seed(loss_desc)
        differentiate(builder, forward, requires, {loss_name}, desc_of(program))
        builder.finish()
    except BaseException:
        del block.ops[n_ops:]
        block.vars = declared_vars
        del desc_of(program).blocks[n_blocks:]
        raise
    forward[end].attrs[OP_ROLE] = LOSS
    return _params_grads(block, builder.writers)


def differentiate(builder, forward, requires: set, reached: set, program) -> None:
    """Append through ``builder`` the grad ops of ``forward`` (ops in order), in reverse, for
    the ops whose outputs ``reached`` names (the variables a gradient arrives at, updated);
    a ``while`` or ``conditional_block`` gets its gradient block (``control_flow_grad``)."""
    for op in reversed(forward):
        info = REGISTRY.get(op.type)
        if info is None or info.grad is None or reached.isdisjoint(op.output_arg_names()):
            continue
        wanted = [n for n in op.input_arg_names() if n in requires]
        if wanted:
            if op.type in BLOCK_GRADS:
                add_block_grad(builder, op, requires, program)
            else:
                builder.add(op, info, requires)
            reached.update(wanted)


def _requires_grad(block, forward) -> set[str]:
    """Variables that want a gradient: the leaves with stop_gradient=False (fed or not computed
    by the forward ops) and what differentiable ops compute from them."""
    computed = {n for op in forward if op.type != "feed" for n in op.output_arg_names()}
    requires = {n for n, d in block.vars.items() if not d.stop_gradient and n not in computed}
    return propagate_requires(requires, forward)


def propagate_requires(requires: set, forward) -> set[str]:
    """``requires`` with what the differentiable ops of ``forward`` compute from it."""
    for op in forward:
        info = REGISTRY.get(op.type)
        if info is not None and info.grad is not None and \
                not requires.isdisjoint(op.input_arg_names()):
            requires.update(op.output_arg_names())
    return requires


def _params_grads(block, has_grad) -> list[tuple[str, str]]:
    return [(n, grad_name(n)) for n, d in block.vars.items()
            if d.persistable and not d.stop_gradient and grad_name(n) in has_grad]


class _GradBuilder:
    """Appends grad ops to a block, renaming repeated gradient writes and summing them."""

    def __init__(self, block):
        self.block = block
        self.writers: dict[str, list] = {}     # gradient name -> [(op, slot, index)] writing it
        self.read: set[str] = set()             # gradients a grad op has read (complete)

    def seed(self, loss: VarDesc) -> None:
        if any(n < 0 for n in loss.shape):
            raise InvalidArgumentError(
                f"append_backward: loss '{loss.name}' has shape {fmt(loss.shape)}, with "
                f"unknown dims; reduce it to a fixed shape (e.g. with mean) first")
        g = grad_name(loss.name)
        op = new_op("fill_constant", {}, {"Out": [g]},
                    {"shape": list(loss.shape), "dtype": loss.dtype, "value": 1.0},
                    BACKWARD | LOSS)
        self._declare_like(g, loss)
        self.writers[g] = [(op, "Out", 0)]
        self.block.append_op(op)

    def add(self, op: OpDesc, info, requires: set) -> None:
        """Append the grad ops of forward ``op``."""
        steps = grad_steps(info, {s: len(ns) for s, ns in op.inputs.items() if ns},
                           {s: len(ns) for s, ns in op.outputs.items() if ns}, op.attrs)
        temps = {}      # the grad maker's temporaries -> unique names
        for step in steps:
            outs = {}
            for slot, _, bound in step.outs:
                kept = []
                for kind, fslot, i in bound:
                    if kind == IN_GRAD:
                        forward = op.inputs[fslot][i]
                        kept.append(grad_name(forward) if forward in requires else EMPTY_VAR)
                    else:
                        kept.append(temps.setdefault(fslot, unique_name(f"{op.type}_grad.tmp")))
                if any(n != EMPTY_VAR for n in kept):
                    outs[slot] = kept
            if not outs:
                continue
            ins = {}
            for slot, _, bound in step.ins:
                names = [self._read(op, ref, temps) for ref in bound]
                names = [n for n in names if n is not None]
                if names:
                    ins[slot] = names
            new = OpDesc(step.info.type, ins, outs, op.attrs if step.attrs is None else step.attrs)
            new.attrs = {**new.attrs, **proto_attrs(step.info, new), OP_ROLE: BACKWARD}
            writes_temps = False
            for slot, _, bound in step.outs:
                for i, (kind, fslot, j) in enumerate(bound):
                    name = outs.get(slot, (EMPTY_VAR,) * len(bound))[i]
                    if kind == IN_GRAD and name != EMPTY_VAR:
                        self._write(new, slot, i, name, op.inputs[fslot][j])
                    elif kind == TEMP:
                        self.block.add_var(VarDesc(name))
                        writes_temps = True
            self.block.append_op(new)
            if writes_temps:
                self._declare_temps(new)

    def _read(self, op: OpDesc, ref: tuple, temps: dict):
        """The name a grad op reads for binding ``ref``; None to leave an optional input out."""
        kind, fslot, i = ref
        if kind == TEMP:
            return temps[fslot]
        if kind in (FWD_IN, META_IN):
            return op.inputs[fslot][i]
        if kind in (FWD_OUT, META_OUT):
            return op.outputs[fslot][i]
        forward = (op.inputs if kind == IN_GRAD else op.outputs)[fslot][i]
        name = grad_name(forward)
        if name in self.writers:
            self._sum(name)
            self.read.add(name)
            return name
        if kind != OUT_GRAD:    # an optional gradient that never arrived
            return None
        zeros = new_op("fill_zeros_like", {"X": [forward]}, {"Out": [name]}, {}, BACKWARD)
        self._declare_like(name, declared(self.block, forward))
        self.writers[name] = [(zeros, "Out", 0)]
        self.block.append_op(zeros)
        return name

    def _write(self, op: OpDesc, slot: str, index: int, name: str, forward: str) -> None:
        """Record that ``op`` writes gradient ``name``; a second writer renames both."""
        if name in self.read:
            raise PreconditionNotMetError(
                f"append_backward: a gradient of '{forward}' arrives after '{name}' was already "
                f"used (is '{forward}' written in place by a forward op?)")
        writers = self.writers.setdefault(name, [])
        writers.append((op, slot, index))
        if len(writers) == 1:
            self._declare_like(name, declared(self.block, forward))
            return
        if len(writers) == 2:
            first, first_slot, first_index = writers[0]
            first.outputs[first_slot][first_index] = self._renamed(name, 0)
        op.outputs[slot][index] = self._renamed(name, len(writers) - 1)

    def _renamed(self, name: str, k: int) -> str:
        renamed = f"{name}@RENAME@{k}"
        self._declare_like(renamed, self.block.vars[name])
        return renamed

    def _sum(self, name: str) -> None:
        """Before ``name`` is read: sum its partial gradients into it, if it has several."""
        writers = self.writers[name]
        if len(writers) < 2:
            return
        parts = [op.outputs[slot][i] for op, slot, i in writers]
        total = self.block.append_op(new_op("sum", {"X": parts}, {"Out": [name]}, {}, BACKWARD))
        self.writers[name] = [(total, "Out", 0)]

    def finish(self) -> None:
        for name in list(self.writers):
            self._sum(name)

    def _declare_like(self, name: str, like: VarDesc) -> None:
        self.block.add_var(VarDesc(name, like.shape, like.dtype))

    def _declare_temps(self, op: OpDesc) -> None:
        info = op_info(op.type)
        if info.infer_shape is None:
            raise NotFoundError(f"append_backward: grad op {op.type} writes a temporary, but has "
                                f"no shape rule to declare it with")
        infer_op_shapes(self.block, op)


def append_optimizer_ops(program, params_grads, update_op, grad_clip=None) -> list[OpDesc]:
    """Append one update op per ``(parameter, gradient)`` name pair, as ``update_op(param,
    grad)`` (an Optimizer's) describes it. With ``grad_clip`` (``grad_clip([(param, grad),
    ...])`` returns the pairs with clipped gradients), the clip ops it records over all pairs
    come first, with role OPTIMIZE as in Paddle, and the update ops read the clipped gradients.
    Variables the two bring (learning rate, accumulators) become persistable variables, their
    values copied into ``program.scope``; ops ``update_op`` runs to prepare its inputs (weight
    decay, say) are recorded into the program before it.

    Returns the ops to run as targets: the clip ops, then the update ops. (Prune keeps an
    OPTIMIZE op only as a target, as Paddle's does; Paddle's Executor, given no targets, runs
    every OPTIMIZE op, clip ops included.)"""
    block = desc_of(program).global_block()
    scope = program.scope if isinstance(program, Program) else None
    pairs = [(_stand_in(declared(block, p), scope, trainable=True),
              _stand_in(declared(block, g), None, trainable=False)) for p, g in params_grads]
    ops = []
    if grad_clip is not None:
        with recording() as recorder:
            pairs = grad_clip(pairs)
        start = len(block.ops)
        _append_recorded(block, scope, recorder, OPTIMIZE)
        ops = block.ops[start:]
    for param, grad in pairs:
        with recording() as recorder:
            type, inputs, outputs, attrs = update_op(param, grad)
        slots = _append_recorded(block, scope, recorder, BACKWARD, (inputs, outputs))
        ops.append(block.append_op(new_op(type, *slots, attrs, OPTIMIZE)))
    return ops


def _append_recorded(block, scope, recorder, role: int, slots=()) -> list[dict]:
    """Append the ops ``recorder`` recorded, with ``role``, and declare the variables they and
    ``slots`` (``{slot: [Variable]}`` maps) name: one no recorded op writes is state,
    persistable, its value copied into ``scope``. Returns ``slots`` with names for Variables."""
    builder = ProgramBuilder()
    for h in recorder:
        builder.add_op(h, role)
    named = [{s: [builder.name(v) for v in vs] for s, vs in given.items()} for given in slots]
    for name, v in builder.variables.items():
        if name not in block.vars:
            state = name not in builder.written
            block.add_var(VarDesc(name, v.shape, v.desc.dtype, persistable=state))
            if state and scope is not None:
                scope.var(name).value = host_array(v.value()).copy()
    block.ops.extend(builder.ops)
    return named


def _stand_in(desc: VarDesc, scope, trainable: bool):
    """A Variable for ``update_op`` standing for the program's variable ``desc``: its value in
    ``scope``, else zeros."""
    var = scope.find_var(desc.name) if scope is not None else None
    value = host_array(var.value) if var is not None and var.value is not None else \
        np.zeros(desc.shape, dtypes.to_numpy(desc.dtype))
    return new_variable(VarDesc(desc.name, desc.shape, desc.dtype, trainable, not trainable),
                        value, 0)
