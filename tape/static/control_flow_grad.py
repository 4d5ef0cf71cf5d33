"""Static backward through ``while`` and ``conditional_block``: the seed's "RNN Op =>
recursively call Backward on stepnet".

The forward sub-block is differentiated like block 0, by the same grad makers, into a new
gradient block whose parent is the forward block (so that, run in a child of the forward run's
scope, its grad ops read the forward values). The op that runs it, ``while_grad`` /
``conditional_block_grad``, is appended to the enclosing block in the forward op's place.

A sub-block writes variables of the enclosing block in place (a loop variable: ``s = f(s)``).
For the gradient those writes are renamed, the last one to ``<name>@BLOCK_OUT`` (``final_name``):
the gradient block then reads the incoming gradient as ``<name>@BLOCK_OUT@GRAD`` and writes the
gradient with respect to the value before the block ran as ``<name>@GRAD``, and the runner
(``tape.static.control_flow``) moves them: per iteration, last to first, for ``while``.
"""
from __future__ import annotations

import copy

from .. import dtypes
from ..desc import BlockDesc, OpDesc
from ..errors import PreconditionNotMetError
from ..ops.control_flow import SKIP_EAGER_DELETION_VARS, SUB_BLOCK
from ..registry import grad_name
from .program import BACKWARD, EMPTY_VAR, OP_ROLE

BLOCK_GRADS = {"while": "while_grad", "conditional_block": "conditional_block_grad"}
BLOCK_OUT = "@BLOCK_OUT"


def final_name(name: str) -> str:
    """The gradient block's name for the value a sub-block leaves in ``name``."""
    return name + BLOCK_OUT


def add_block_grad(builder, op: OpDesc, requires: set, program) -> OpDesc:
    """Append to ``builder``'s block the grad op of control-flow ``op`` and add its gradient
    block to ``program``; returns the grad op."""
    from .backward import _GradBuilder, differentiate, propagate_requires
    is_while = op.type == "while"
    in_slot = "X" if is_while else "Input"
    inputs, outs = op.input(in_slot), op.output("Out")
    forward_idx = op.attrs[SUB_BLOCK]
    renamed = _renamed_writes(program.blocks[forward_idx].ops, set(outs))
    inner_requires = propagate_requires({n for n in inputs if n in requires}, renamed)

    def floating(name):
        return _desc(builder.block, program, name).dtype in dtypes.FLOATING

    # the incoming gradients: of the final values that want one
    seeds = [o for o in outs if final_name(o) in inner_requires and floating(o)]
    out_grads = []
    for o in outs:
        g = grad_name(o)
        if o in seeds and g in builder.writers:
            builder._sum(g)
            builder.read.add(g)
            out_grads.append(g)
        else:
            out_grads.append(EMPTY_VAR)

    grad_block = BlockDesc(len(program.blocks), forward_idx)
    program.blocks.append(grad_block)
    grad_block.vars = _visible(program, forward_idx)
    for o in seeds:
        grad_block.vars[final_name(o)] = copy.copy(_desc(builder.block, program, o))
        grad_block.vars[final_name(o)].name = final_name(o)
    inner = _GradBuilder(grad_block)
    provided = {}
    for o in seeds:
        name = grad_name(final_name(o))
        inner._declare_like(name, grad_block.vars[final_name(o)])
        provided[name] = OpDesc("provided", {}, {"Out": [name]})   # written by the runner
        inner.writers[name] = [(provided[name], "Out", 0)]
    differentiate(inner, renamed, inner_requires, {final_name(o) for o in seeds}, program)
    inner.finish()
    for name, marker in provided.items():
        if marker.outputs["Out"] != [name]:
            raise PreconditionNotMetError(
                f"append_backward: block {forward_idx} of {op.type} reads the value it leaves "
                f"in '{name[:-len('@GRAD') - len(BLOCK_OUT)]}' in a differentiable op after "
                f"writing it; compute that from the value before the write")
    written = {n for g in grad_block.ops for n in g.output_arg_names()} | set(provided)
    grad_block.vars = {n: d for n, d in grad_block.vars.items() if n in written}

    x_grads = [grad_name(x) if x in requires and floating(x) else EMPTY_VAR for x in inputs]
    if is_while:
        ins = {"X": inputs, "Out": outs, grad_name("Out"): out_grads,
               "StepScopes": op.output("StepScopes")}
        attrs = {"is_test": False, "original_output_grad": out_grads}
    else:
        ins = {"Cond": op.input("Cond"), "Input": inputs, "Out": outs,
               grad_name("Out"): out_grads, "Scope": op.output("Scope")}
        attrs = {"is_scalar_condition": op.attrs.get("is_scalar_condition", False)}
    attrs.update({SUB_BLOCK: grad_block.idx, SKIP_EAGER_DELETION_VARS: (),
                  OP_ROLE: BACKWARD})
    grad_op = OpDesc(BLOCK_GRADS[op.type], ins, {grad_name(in_slot): x_grads}, attrs)
    builder.block.append_op(grad_op)
    for i, (x, g) in enumerate(zip(inputs, x_grads)):
        if g == EMPTY_VAR:
            continue
        if x in outs:   # a loop variable: its gradient is rewritten in place, as it was
            builder._declare_like(g, _desc(builder.block, program, x))
            builder.writers[g] = [(grad_op, grad_name(in_slot), i)]
            builder.read.discard(g)
        else:
            builder._write(grad_op, grad_name(in_slot), i, g, x)
    return grad_op


def _renamed_writes(ops, outer: set) -> list:
    """Copies of ``ops`` with each write of an ``outer`` variable given a name of its own (the
    last one ``final_name``) and later reads following it."""
    from .program import copy_op
    total = {}
    for op in ops:
        for n in op.output_arg_names():
            if n in outer:
                total[n] = total.get(n, 0) + 1
    current, seen, renamed = {}, {}, []
    for op in ops:
        op = copy_op(op)
        op.inputs = {s: [current.get(n, n) for n in ns] for s, ns in op.inputs.items()}
        for names in op.outputs.values():
            for i, n in enumerate(names):
                if n in outer:
                    seen[n] = seen.get(n, 0) + 1
                    new = final_name(n) + ("" if seen[n] == total[n] else f"@{seen[n]}")
                    current[n] = names[i] = new
        renamed.append(op)
    return renamed


def _visible(program, idx: int) -> dict:
    """Copies of the VarDescs block ``idx`` sees (its own, then its ancestors'), for the
    gradient builder to look up; only what the gradient block writes stays declared there."""
    found = {}
    while idx >= 0:
        block = program.blocks[idx]
        for n, d in block.vars.items():
            found.setdefault(n, copy.copy(d))
        idx = block.parent_idx
    return found


def _desc(block, program, name: str):
    from .plan import var_desc
    d = var_desc(program, block, name)
    if d is None:
        raise PreconditionNotMetError(f"append_backward: '{name}' is not declared in block "
                                      f"{block.idx} or its ancestors")
    return d
