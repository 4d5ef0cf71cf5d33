"""data_parallel: a training program rewritten for N ranks with Paddle's collective ops.

Paddle's collective transpiler (GradAllReduce) does the same: ``c_broadcast`` of every
parameter from rank 0 in the startup program, so the ranks start alike, and in the main program
a ``c_allreduce_sum`` of every parameter gradient followed by a ``scale`` by 1 / nranks (the
mean over the ranks), in place, before the optimizer ops. Tape's Executor runs them over MPI
(``tape.distributed``). Paddle also inserts c_sync_calc_stream / c_sync_comm_stream to order
CUDA streams; MPI on the host has no streams, so they are left out.
"""
from __future__ import annotations

import copy

from .. import world
from ..desc import GRAD_SUFFIX, ProgramDesc
from ..errors import InvalidArgumentError, PreconditionNotMetError
from .program import BACKWARD, FORWARD, OP_ROLE, OPTIMIZE, Program, desc_of, new_op

# Paddle's attribute naming the (parameter, gradient) pairs an op works on
OP_ROLE_VAR = "op_role_var"


def data_parallel(program, nranks: int | None = None, root: int = 0) -> Program:
    """Rewrite training ``program`` (with backward and optimizer ops, e.g. by ``minimize``) in
    place for data parallelism over ``nranks`` ranks (default: ``world_size()``), and return
    its startup program: one ``c_broadcast`` per parameter from rank ``root``, sharing
    ``program``'s scope. Run the startup once, then train as before; each rank feeds its part
    of the batch::

        startup = tape.static.data_parallel(program)
        exe.run(startup, targets=startup.global_block().ops)
        for ...: exe.run(program, feed, [cost], targets=updates)

    The rewritten program saves and loads like any other (its new ops are Paddle's).
    """
    desc = desc_of(program)
    block = desc.global_block()
    nranks = world.world_size() if nranks is None else nranks
    if not isinstance(nranks, int) or nranks < 1:
        raise InvalidArgumentError(f"data_parallel: nranks must be a positive int, received "
                                   f"{nranks!r}")
    if any(op.type == "c_allreduce_sum" for op in block.ops):
        raise PreconditionNotMetError("data_parallel: the program already has c_allreduce_sum "
                                      "ops; rewrite a program once")
    first_update = next((i for i, op in enumerate(block.ops) if _role(op) & OPTIMIZE), None)
    if first_update is None:
        raise PreconditionNotMetError("data_parallel: the program has no optimizer ops; add "
                                      "them first (optimizer.minimize(loss, program))")
    pairs = _params_grads(block, block.ops[first_update:])
    sync = []
    for param, grad in pairs:
        attrs = {OP_ROLE_VAR: (param, grad)}
        sync.append(new_op("c_allreduce_sum", {"X": [grad]}, {"Out": [grad]},
                           {"ring_id": 0, "use_calc_stream": True}, BACKWARD))
        sync.append(new_op("scale", {"X": [grad]}, {"Out": [grad]},
                           {"scale": 1.0 / nranks}, BACKWARD))
        sync[-2].attrs.update(attrs)
        sync[-1].attrs.update(attrs)
    block.ops[first_update:first_update] = sync
    return _startup(program, desc, [p for p, _ in pairs], root)


def _role(op) -> int:
    role = op.attrs.get(OP_ROLE, FORWARD)
    return role if isinstance(role, int) else FORWARD


def _params_grads(block, updates) -> list:
    """``[(parameter, gradient)]`` the optimizer ops read, each once, in program order: a
    gradient is ``<parameter>@GRAD`` (what a clip op reads, or an update op's Grad)."""
    pairs = {}
    for op in updates:
        for name in op.input_arg_names():
            param = name[:-len(GRAD_SUFFIX)] if name.endswith(GRAD_SUFFIX) else None
            if param is not None and param in block.vars and block.vars[param].persistable:
                pairs.setdefault(param, name)
    if not pairs:
        raise PreconditionNotMetError("data_parallel: no optimizer op reads a parameter "
                                      "gradient (<parameter>@GRAD)")
    return list(pairs.items())


def _startup(program, desc, params: list, root: int) -> Program:
    """A program of one ``c_broadcast`` per parameter (in place), sharing ``program``'s
    scope."""
    startup = ProgramDesc()
    block = startup.global_block()
    source = desc.global_block()
    for name in params:
        block.add_var(copy.copy(source.vars[name]))
        block.append_op(new_op("c_broadcast", {"X": [name]}, {"Out": [name]},
                               {"ring_id": 0, "root": root, "use_calc_stream": True}, FORWARD))
    scope = program.scope if isinstance(program, Program) else None
    return Program(startup, scope, feed_names=[], fetch_names=[])
