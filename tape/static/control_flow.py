"""How the Executor runs the ops that work on the scope itself (``tape.ops.control_flow``):
``while`` and ``conditional_block`` run their sub-block, each run in a child Scope (the seed
design's stack frame); ``select_input`` / ``select_output`` move the chosen branch's value;
the tensor-array ops read and write a Python list in place.

A sub-block is prepared once, with the op (``block_steps``: the same Steps, CallPlans and
kernels as block 0), and run as often as the condition says. A sub-block's op that writes a
variable of an enclosing block writes it where that block's run keeps it.
"""
from __future__ import annotations

from collections import ChainMap

import numpy as np

from ..errors import InvalidArgumentError, NotFoundError
from ..ops.control_flow import SUB_BLOCK
from ..place import host_array
from ..registry import grad_name
from .control_flow_grad import final_name
from .plan import RUNNERS, block_steps, route, store
from .program import EMPTY_VAR, proto_attrs
from .scope import Scope


class VisibleBlock:
    """A block as its ops see it: ``vars`` holds its own VarDescs and, behind them, those of
    its ancestors; ``add_var`` declares in the block itself."""

    __slots__ = ("block", "vars")

    def __init__(self, block, vars):
        self.block, self.vars = block, vars

    def add_var(self, desc):
        return self.block.add_var(desc)


def visible_block(program, block):
    """``block`` itself if it is block 0, else a VisibleBlock of it."""
    if block.parent_idx < 0:
        return block
    chain, idx = [], block.idx
    while idx >= 0:
        chain.append(program.blocks[idx].vars)
        idx = program.blocks[idx].parent_idx
    return VisibleBlock(block, ChainMap(*chain))


class BlockRun:
    """The prepared Steps of block ``idx`` of ``program``: ``run`` runs them in ``local``."""

    __slots__ = ("idx", "steps")

    def __init__(self, program, idx: int, place):
        if not isinstance(idx, int) or not 0 < idx < len(program.blocks):
            raise NotFoundError(f"Executor.run: a sub_block attribute names block {idx}, but "
                                f"the program has blocks 0..{len(program.blocks) - 1}")
        self.idx = idx
        self.steps, _ = block_steps(program, program.blocks[idx], place)

    def run(self, place, scope, local) -> None:
        for step in self.steps:
            step.run(place, scope, local)


class ScopeOp:
    """What every Executor-run op shares: its attributes, where its outputs go, and reading a
    value with an error naming the op when nothing wrote it."""

    __slots__ = ("index", "op", "info", "attrs", "routes")

    def __init__(self, index: int, op, info, block, program, place):
        self.index, self.op, self.info = index, op, info
        self.attrs = proto_attrs(info, op)
        self.routes = {n: route(program, block, op, n) for n in op.output_arg_names()}

    def read(self, local, name: str):
        v = local.find_var(name)
        if v is None or v.value is None:
            raise NotFoundError(f"Executor.run: op #{self.index} ({self.op.type}) reads "
                                f"'{name}', which holds no value in this run")
        return v.value

    def read_optional(self, local, name: str):
        """The value of ``name``, or None if nothing wrote it."""
        v = local.find_var(name)
        return None if v is None else v.value

    def write(self, name: str, value, scope, local) -> None:
        store(self.routes[name], name, value, scope, local)

    def create_outputs(self, names, local) -> None:
        """Make sure the variables a sub-block writes exist before it runs, so that its writes
        land in this block's scope and outlive the sub-block's."""
        for name in names:
            if name != EMPTY_VAR and local.find_var(name) is None:
                local.var(name)

    def selected(self, local, slot: str, names: list) -> str:
        """The entry of ``names`` (slot ``slot``) that input Mask picks."""
        mask = self.index_value(local, "Mask")
        if not 0 <= mask < len(names):
            raise InvalidArgumentError(f"{self.op.type}: Mask is {mask}, but {slot} has "
                                       f"{len(names)} entries")
        return names[mask]

    def index_value(self, local, slot: str) -> int:
        value = host_array(self.read(local, self.op.input(slot)[0]))
        if value.size != 1 or value.dtype.kind not in "iu":
            raise InvalidArgumentError(f"{self.op.type}: input {slot} must be one integer, "
                                       f"received {value.dtype} {list(value.shape)}")
        return int(value.reshape(-1)[0])


def _true(value) -> bool:
    value = host_array(value)
    if value.size != 1:
        raise InvalidArgumentError(f"a control-flow condition must be one bool element, "
                                   f"received shape {list(value.shape)}")
    return bool(value.reshape(-1)[0])


class StepScopes(list):
    """A ``while``'s record for ``while_grad``: per iteration, ``(scope, {name: value before
    the iteration})`` of the variables the iteration rewrote."""


class WhileRun(ScopeOp):
    """``while``: a fresh child scope per iteration while the condition holds. Unless
    ``is_test``, each iteration's scope and the values it overwrote are kept in StepScopes."""

    __slots__ = ("body", "condition", "outs", "carried", "step_scopes")

    def __init__(self, index, op, info, block, program, place):
        super().__init__(index, op, info, block, program, place)
        self.body = BlockRun(program, self.attrs[SUB_BLOCK], place)
        self.condition = op.input("Condition")
        if len(self.condition) != 1:
            raise InvalidArgumentError(f"while: expected one Condition, received "
                                       f"{self.condition}")
        self.outs = op.output("Out")
        self.carried = [n for n in self.outs if n in set(op.input("X") + self.condition)]
        names = [n for n in op.output("StepScopes") if n != EMPTY_VAR]
        self.step_scopes = names[0] if names and not self.attrs["is_test"] else None

    def run(self, place, scope, local) -> None:
        self.create_outputs(self.outs, local)
        steps = StepScopes()
        while _true(self.read(local, self.condition[0])):
            step = Scope(local)
            if self.step_scopes is not None:
                steps.append((step, {n: local.find_var(n).value for n in self.carried}))
            self.body.run(place, scope, step)
        if self.step_scopes is not None:
            self.write(self.step_scopes, steps, scope, local)


class ConditionalBlockRun(ScopeOp):
    """``conditional_block``: the sub-block in a child scope if the condition holds (a bool
    scalar, or with ``is_scalar_condition`` off: every Cond tensor non-empty)."""

    __slots__ = ("body", "outs", "scope_out")

    def __init__(self, index, op, info, block, program, place):
        super().__init__(index, op, info, block, program, place)
        self.body = BlockRun(program, self.attrs[SUB_BLOCK], place)
        self.outs = op.output("Out")
        names = [n for n in op.output("Scope") if n != EMPTY_VAR]
        self.scope_out = names[0] if names else None

    def holds(self, local) -> bool:
        values = [self.read(local, n) for n in self.op.input("Cond")]
        if self.attrs["is_scalar_condition"]:
            return _true(values[0])
        return all(v.size > 0 for v in values)

    def run(self, place, scope, local) -> None:
        self.create_outputs(self.outs, local)
        ran = None
        if self.holds(local):
            ran = Scope(local)
            self.body.run(place, scope, ran)
        if self.scope_out is not None:
            self.write(self.scope_out, ran, scope, local)


class SelectInputRun(ScopeOp):
    """Out = X[Mask]: only the chosen X need hold a value."""

    __slots__ = ()

    def run(self, place, scope, local) -> None:
        chosen = self.selected(local, "X", self.op.input("X"))
        self.write(self.op.output("Out")[0], self.read(local, chosen), scope, local)


class SelectOutputRun(ScopeOp):
    """Out[Mask] = X; the other outputs are left alone."""

    __slots__ = ()

    def run(self, place, scope, local) -> None:
        chosen = self.selected(local, "Out", self.op.output("Out"))
        self.write(chosen, self.read(local, self.op.input("X")[0]), scope, local)


class WriteToArrayRun(ScopeOp):
    """Out[I] = X, the array (a list) grown to I + 1 entries if shorter, written in place."""

    __slots__ = ()

    def run(self, place, scope, local) -> None:
        name = self.op.output("Out")[0]
        i = self.index_value(local, "I")
        if i < 0:
            raise InvalidArgumentError(f"write_to_array: I is {i}; expected >= 0")
        holder = local.find_var(name)
        array = holder.value if holder is not None and isinstance(holder.value, list) else []
        array.extend([None] * (i + 1 - len(array)))
        array[i] = self.read(local, self.op.input("X")[0])
        self.write(name, array, scope, local)


class ReadFromArrayRun(ScopeOp):
    """Out = X[I]."""

    __slots__ = ()

    def run(self, place, scope, local) -> None:
        name = self.op.input("X")[0]
        array, i = self.read(local, name), self.index_value(local, "I")
        if not isinstance(array, list) or not 0 <= i < len(array) or array[i] is None:
            size = len(array) if isinstance(array, list) else "not an array"
            raise InvalidArgumentError(f"read_from_array: I is {i}, but the array '{name}' "
                                       f"has no entry there (length {size})")
        self.write(self.op.output("Out")[0], array[i], scope, local)


class ArrayLengthRun(ScopeOp):
    """Out = [len(X)], int64."""

    __slots__ = ()

    def run(self, place, scope, local) -> None:
        array = self.read(local, self.op.input("X")[0])
        if not isinstance(array, list):
            raise InvalidArgumentError(f"lod_array_length: X ({self.op.input('X')[0]}) is not "
                                       f"a tensor array")
        self.write(self.op.output("Out")[0], place.put(np.array([len(array)], np.int64)),
                   scope, local)


# ---- gradients: the gradient block static append_backward wrote (control_flow_grad) ----

class BlockGradRun(ScopeOp):
    """What while_grad and conditional_block_grad share: the gradient block, the forward
    input and output names with their gradients', and moving values in and out of the
    gradient block's scope."""

    __slots__ = ("body", "inputs", "input_grads", "outs", "out_grads")

    def __init__(self, index, op, info, block, program, place, in_slot):
        super().__init__(index, op, info, block, program, place)
        self.body = BlockRun(program, self.attrs[SUB_BLOCK], place)
        self.inputs, self.input_grads = op.input(in_slot), op.output(grad_name(in_slot))
        self.outs, self.out_grads = op.input("Out"), op.input(grad_name("Out"))

    def differentiate(self, place, scope, forward, finals: dict, incoming: dict) -> Scope:
        """Run the gradient block in a child of ``forward`` (the forward run's scope) given
        the final values and their incoming gradients ``{name: value}``; returns its scope."""
        inner = Scope(forward)
        for name, value in finals.items():
            inner.var(final_name(name)).value = value
        for name, value in incoming.items():
            inner.var(grad_name(final_name(name))).value = value
        self.body.run(place, scope, inner)
        return inner

    def write_input_grads(self, values: dict, place, scope, local) -> None:
        """Write each wanted input gradient: ``values[name]``, else zeros."""
        for name, grad in zip(self.inputs, self.input_grads):
            if grad == EMPTY_VAR:
                continue
            value = values.get(name)
            if value is None:
                value = place.array_module().zeros_like(self.read(local, name))
            self.write(grad, value, scope, local)


def _own(inner: Scope, name: str):
    v = inner.own_var(name)
    return None if v is None else v.value


class WhileGradRun(BlockGradRun):
    """``while_grad``: the gradient block once per forward iteration, last to first, in a
    child of that iteration's scope with the loop variables as they were before it; the loop
    variables' gradients carry from one iteration to the one before, the others' add up."""

    __slots__ = ("carried",)

    def __init__(self, index, op, info, block, program, place):
        super().__init__(index, op, info, block, program, place, "X")
        self.carried = [n for n in self.inputs if n in set(self.outs)]

    def run(self, place, scope, local) -> None:
        steps = self.read(local, self.op.input("StepScopes")[0])
        after = {n: self.read(local, n) for n in self.carried}
        floating = [n for n in self.carried if after[n].dtype.kind == "f"]
        carry = {o: self.read_optional(local, g) for o, g in zip(self.outs, self.out_grads)
                 if g != EMPTY_VAR and o in after}
        total, xp = {}, place.array_module()
        for step, before in reversed(steps):
            for n in self.carried:  # the loop variables as the iteration read them (its
                step.var(n).value = before[n]  # nested blocks' scopes look here too)
            incoming = {n: xp.zeros_like(after[n]) if carry.get(n) is None else carry[n]
                        for n in floating}
            inner = self.differentiate(place, scope, step, {n: after[n] for n in floating},
                                       incoming)
            carry = {n: _own(inner, grad_name(n)) for n in floating}
            for n in self.inputs:
                g = None if n in after else _own(inner, grad_name(n))
                if g is not None:
                    total[n] = g if n not in total else total[n] + g
            after = before
        self.write_input_grads({**total, **carry}, place, scope, local)


class ConditionalBlockGradRun(BlockGradRun):
    """``conditional_block_grad``: if the forward block ran, the gradient block in a child of
    its scope; else the input gradients are zeros."""

    __slots__ = ()

    def __init__(self, index, op, info, block, program, place):
        super().__init__(index, op, info, block, program, place, "Input")

    def run(self, place, scope, local) -> None:
        forward = self.read_optional(local, self.op.input("Scope")[0])
        values = {}
        if forward is not None:
            finals, incoming = {}, {}
            for o, g in zip(self.outs, self.out_grads):
                if g != EMPTY_VAR:
                    finals[o], incoming[o] = self.read(local, o), self.read(local, g)
            inner = self.differentiate(place, scope, forward, finals, incoming)
            values = {n: _own(inner, grad_name(n)) for n in self.inputs}
        self.write_input_grads(values, place, scope, local)


RUNNERS.update({
    "while_grad": WhileGradRun, "conditional_block_grad": ConditionalBlockGradRun,
    "while": WhileRun, "conditional_block": ConditionalBlockRun,
    "select_input": SelectInputRun, "select_output": SelectOutputRun,
    "write_to_array": WriteToArrayRun, "read_from_array": ReadFromArrayRun,
    "lod_array_length": ArrayLengthRun,
})
