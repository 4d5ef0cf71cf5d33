"""OpHandle, Tape, the per-thread global tape and ``no_grad``."""
from __future__ import annotations

import contextlib
import itertools
import threading

from .dispatch import CallPlan
from .errors import InvalidArgumentError, PreconditionNotMetError
from .registry import OpInfo, op_info
from .runner import fate, make_runner, tape_spent
from .variable import Variable

_serials = itertools.count(1)


class _ThreadState(threading.local):
    """Per thread: the global tape and how deep inside ``no_grad`` blocks we are."""

    tape = None
    no_grad_depth = 0


_local = _ThreadState()


class OpHandle:
    """One recorded op: its CallPlan and ``{slot: [entry]}`` inputs and outputs.

    An entry is the Variable itself when backward reads its value (the grad maker declares it)
    or when it is a leaf that receives a gradient; otherwise only its VarDesc, so the value is
    freed as soon as the user drops it.
    """

    __slots__ = ("plan", "inputs", "outputs")

    def __init__(self, plan: CallPlan, inputs: dict, outputs: dict):
        self.plan = plan
        self.inputs = inputs
        self.outputs = outputs

    @property
    def type(self) -> str:
        return self.plan.info.type

    @property
    def info(self) -> OpInfo:
        return self.plan.info

    @property
    def attrs(self) -> dict:
        return self.plan.attrs

    def __repr__(self):
        def names(slots):
            return ", ".join(f"{k}={[e.name for e in v]}" for k, v in slots.items())
        return f"OpHandle({names(self.outputs)} = {self.type}({names(self.inputs)}))"


class Tape:
    """Records the ops that lead to Variables that want gradients; ``backward`` replays them."""

    __slots__ = ("serial", "_ops", "_spent", "tracing")

    def __init__(self, tracing: bool = False):
        """``tracing=True``: record every op and keep every value (for export to a program),
        not only what backward needs."""
        self.serial = next(_serials)
        self._ops: list[OpHandle] = []
        self._spent = False
        self.tracing = tracing

    def __len__(self):
        return len(self._ops)

    def __iter__(self):
        return iter(self._ops)

    def add_op(self, type: str, inputs: dict, outputs: dict | None = None,
               attrs: dict | None = None) -> dict:
        """Run op ``type`` now and record it; returns ``{slot: [Variable]}`` of its outputs.

        ``inputs`` is ``{slot: [Variable]}``; ``outputs`` likewise, naming Variables to write
        (omitted: new Variables are made).
        """
        info = op_info(type)
        for slot in inputs:
            if slot not in info.input_names:
                raise InvalidArgumentError(f"{type}: unknown input slot '{slot}'; the op takes "
                                           f"{list(info.input_names)}")
        if outputs is not None:
            for slot in outputs:
                if slot not in info.output_names:
                    raise InvalidArgumentError(f"{type}: unknown output slot '{slot}'; the op "
                                               f"writes {list(info.output_names)}")
        return self.run(info, inputs, attrs, outputs)

    def run(self, info: OpInfo, inputs: dict, attrs, outputs=None) -> dict:
        """Check, infer, run the kernel and record: the body of every eager op, written out
        for the op's slots (``tape.runner``)."""
        return (info.runner or runner(info))(self, inputs, attrs, outputs)

    def backward(self, loss: Variable) -> None:
        """Gradients of ``loss`` (seeded with ones) into ``.grad`` of the leaves that want them."""
        from .backward import run_backward
        if self._spent:
            raise PreconditionNotMetError(
                "backward was already run on this tape, which released its ops; call "
                "tape.reset_global_tape() and run the forward pass again")
        if loss._tape != self.serial:
            why = (f"was computed on an earlier tape, which {fate(loss._tape)}" if loss._tape
                   else "was not computed from any Variable with stop_gradient=False")
            raise PreconditionNotMetError(f"backward: {loss.name} {why}, so it has no gradient "
                                          f"to propagate")
        ops, self._ops, self._spent = self._ops, [], True
        tape_spent(self.serial)
        run_backward(ops, {loss.desc: loss.place.array_module().ones_like(loss._value)})


def get_global_tape() -> Tape:
    """This thread's tape (made on first use)."""
    t = _local.tape
    if t is None:
        t = _local.tape = Tape()
    return t


def reset_global_tape() -> Tape:
    """Start a new tape for this thread: once per training iteration, as in DyNet."""
    t = _local.tape = Tape()
    return t


_RUNNER_ENV = {"local": _local, "restart": reset_global_tape, "OpHandle": OpHandle}


def runner(info: OpInfo):
    """The eager runner of op ``info``, ``run(tape, inputs, attrs, outputs)`` (made on first
    use, then ``info.runner``): what ``Tape.run`` calls."""
    if info.runner is None:
        info.runner = make_runner(info, _RUNNER_ENV)
    return info.runner


@contextlib.contextmanager
def using_tape(t: Tape):
    """Make ``t`` this thread's global tape inside the block; the previous one comes back after,
    also on an error."""
    previous = _local.tape
    _local.tape = t
    try:
        yield t
    finally:
        _local.tape = previous


@contextlib.contextmanager
def no_grad():
    """Run ops without recording them: their outputs never want gradients."""
    _local.no_grad_depth += 1
    try:
        yield
    finally:
        _local.no_grad_depth -= 1
