"""From a recorded tape to a Program: ``trace(fn, *example_inputs)`` and ``to_program``."""
from __future__ import annotations

import contextlib

import numpy as np

from ..desc import OpDesc, ProgramDesc, VarDesc
from ..errors import InvalidArgumentError, PreconditionNotMetError
from ..place import host_array
from ..tape import Tape, using_tape
from ..variable import Variable, forbid_value_reads
from .program import (
    FORWARD,
    OP_ROLE,
    Program,
    ensure_holder,
    feed_op,
    fetch_op,
    infer_op_shapes,
)
from .scope import Scope


def trace(fn, *example_inputs) -> Program:
    """Run ``fn(*inputs)`` once on a fresh tape that records every op, and return the Program.

    ``example_inputs`` are Variables or arrays (an array becomes a Variable named ``input_<i>``);
    they are the program's feeds, in order, with an unknown (-1) first, batch dimension. ``fn``
    returns a Variable or a tuple/list of them: the fetches. Parameters and other values ``fn``
    reads without computing them become persistable variables, held in ``program.scope``.

    Reading a value while tracing (``bool(v)``, ``float(v)``, ``v.value()``, ``np.asarray(v)``)
    raises an error naming the line: the program would otherwise bake in one branch.

    >>> layer = tape.layers.Linear(4, 2)
    >>> program = tape.static.trace(layer, np.ones((8, 4), np.float32))
    >>> program.feed_names
    ['input_0']
    >>> tape.static.Executor().run(program, {"input_0": batch}, program.fetch_names)
    """
    inputs = [v if isinstance(v, Variable) else Variable(np.asarray(v), name=f"input_{i}")
              for i, v in enumerate(example_inputs)]
    with recording() as recorder, forbid_value_reads():
        result = fn(*inputs)
    outputs = list(result) if isinstance(result, (list, tuple)) else [result]
    for i, out in enumerate(outputs):
        if not isinstance(out, Variable):
            raise InvalidArgumentError(f"trace: the function must return Variables; output {i} "
                                       f"is a {type(out).__name__}")
    return to_program(recorder, inputs, outputs)


@contextlib.contextmanager
def recording():
    """Make a fresh ``Tape(tracing=True)`` this thread's global tape inside the block (the
    previous one comes back after, also on an error); yields it."""
    with using_tape(Tape(tracing=True)) as recorder:
        yield recorder


def to_program(tape: Tape, feed, fetch) -> Program:
    """The Program of the ops ``tape`` recorded (it must be a ``Tape(tracing=True)``): ``feed``
    and ``fetch`` are Variables (or their names), in col order; fed variables get an unknown (-1)
    batch dimension.

    >>> recorder = tape.Tape(tracing=True)
    >>> y = recorder.add_op("relu", {"X": [x]})["Out"][0]
    >>> program = tape.static.to_program(recorder, feed=[x], fetch=[y])
    """
    if not tape.tracing:
        raise PreconditionNotMetError(
            "to_program: this tape records only the ops that gradients need; record with "
            "Tape(tracing=True) (or use tape.static.trace), which keeps every op and value")
    builder = ProgramBuilder()
    for h in tape:
        builder.add_op(h, FORWARD)
    feed_names = [builder.resolve(v, "feed") for v in feed]
    fetch_names = [builder.resolve(v, "fetch") for v in fetch]
    return builder.program(feed_names, fetch_names)


class ProgramBuilder:
    """Collects OpDescs and the Variables they name from a tape's OpHandles."""

    def __init__(self):
        self.ops: list[OpDesc] = []
        self.variables: dict[str, Variable] = {}
        self.written: set[str] = set()
        self.read_first: dict[str, None] = {}    # read before any op wrote them, in order
        self.blocks: list = []    # sub-blocks that control flow (tape.static.nn) recorded

    def name(self, v) -> str:
        """The name of Variable ``v``, which no other Variable of the program may have."""
        name = v.name
        known = self.variables.get(name)
        if known is None:
            self.variables[name] = v
        elif known is not v:
            raise InvalidArgumentError(f"to_program: two different Variables are named "
                                       f"'{name}'; names must be unique within a program")
        return name

    def add_op(self, h, role: int) -> None:
        ins, outs = {}, {}
        for slot, entries in h.inputs.items():
            ins[slot] = [self.name(v) for v in entries]
            for n in ins[slot]:
                if n not in self.written:
                    self.read_first[n] = None
        for slot, entries in h.outputs.items():
            outs[slot] = [self.name(v) for v in entries]
            self.written.update(outs[slot])
        attrs = {**h.attrs, OP_ROLE: role}
        if hasattr(h, "add_blocks"):   # control flow: its sub-blocks join the program
            attrs.update(h.add_blocks(self, role))
        self.ops.append(OpDesc(h.type, ins, outs, attrs))

    def resolve(self, v, role: str) -> str:
        """The name of a feed or fetch given as a Variable or a name."""
        if isinstance(v, str):
            if v not in self.variables:
                raise InvalidArgumentError(f"to_program: {role} '{v}' names no Variable the "
                                           f"tape's ops use")
            return v
        if not isinstance(v, Variable):
            raise InvalidArgumentError(f"to_program: a {role} must be a Variable or its name, "
                                       f"received {type(v).__name__}")
        return self.name(v)

    def program(self, feed_names: list, fetch_names: list) -> Program:
        if len(set(feed_names)) != len(feed_names):
            raise InvalidArgumentError(f"to_program: feeds {feed_names} repeat a variable")
        fed = set(feed_names)
        for name in feed_names:
            if name in self.written and name not in self.read_first:
                raise InvalidArgumentError(f"to_program: feed '{name}' is computed by an op of "
                                           f"the tape, so it cannot be fed")
        desc = ProgramDesc()
        block = desc.global_block()
        ensure_holder(block, "feed")
        scope = Scope()
        # what an op reads before any op writes it (a parameter, or batch norm's running
        # statistics, which it then updates in place) starts from its value now
        needs_value = {n for n in self.read_first if n not in fed} | {
            n for n in fetch_names if n not in fed and n not in self.written}
        desc.blocks.extend(self.blocks)
        in_sub_blocks = {n for b in self.blocks for n in b.vars}
        for name, v in self.variables.items():
            if name in in_sub_blocks:
                continue
            d = v.desc
            persistable = name in needs_value or (d.persistable and name not in fed)
            block.add_var(VarDesc(name, d.shape, d.dtype, persistable, d.stop_gradient, d.type,
                                  need_check_feed=name in fed))
            if name in needs_value:
                scope.var(name).value = host_array(v.value()).copy()
        for col, name in enumerate(feed_names):
            block.append_op(feed_op(name, col))
        block.ops.extend(self.ops)
        ensure_holder(block, "fetch")
        for col, name in enumerate(fetch_names):
            block.append_op(fetch_op(name, col))
        _unknown_batch(block, feed_names)
        desc.set_paddle_versions()
        return Program(desc, scope, feed_names, fetch_names)


def _unknown_batch(block, feed_names) -> None:
    """Mark the first dim of each fed variable unknown (-1) and re-run the shape rules, so that
    every variable derived from a feed gets -1 where its size follows the batch."""
    batched = False
    for name in feed_names:
        d = block.vars[name]
        if d.shape:
            d.shape = (-1,) + d.shape[1:]
            batched = True
    if not batched:
        return
    for op in block.ops:
        try:
            infer_op_shapes(block, op)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"trace: with the batch dimension of the feeds unknown "
                                       f"(-1), {e}") from None
