"""OpHandle, Tape, the per-thread global tape and ``no_grad``."""
from __future__ import annotations

import contextlib
import itertools
import threading

from . import flags as _flags
from . import place as _places
from .desc import VarDesc
from .dispatch import CallPlan, infer, invoke
from .errors import InvalidArgumentError, PreconditionNotMetError
from .registry import OpInfo, op_info
from .variable import Variable, name_source, new_variable

_serials = itertools.count(1)
_tmp_names = name_source("tmp")


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
        """Check, infer, run the kernel and record: the body of every eager op.

        One pass over the inputs checks them and gathers the signature (the key of the op's
        cached CallPlan), the arrays for the kernel and the entries a handle would keep;
        ``dispatch.infer`` runs only for a signature not seen before. This runs for every op of
        every iteration.
        """
        if self._spent and self is _local.tape:
            # The first op after backward starts this thread's next tape, as
            # reset_global_tape() would (Variables of the spent one must then be detached).
            return reset_global_tape().run(info, inputs, attrs, outputs)
        arrays, entries = {}, {}
        # The attributes as given, with their types (1, 1.0 and True differ): checked and
        # defaulted only when the signature is new (dispatch.infer), then the plan's.
        key = [(*attrs.items(), *map(type, attrs.values())) if attrs else ()]
        keeps = info.slot_names if self.tracing else info.keeps
        requires_grad = False
        place = None
        for name, duplicable, dispensable in info.slot_specs:
            vs = inputs.get(name)
            if not vs:
                if dispensable:
                    key.append(None)    # absent: told apart from any input's shape
                    continue
                raise InvalidArgumentError(f"{info.type}: input '{name}' is required but was "
                                           f"not given")
            if duplicable:
                key.append(len(vs))
            elif len(vs) != 1:
                raise InvalidArgumentError(f"{info.type}: input '{name}' takes one Variable, "
                                           f"received {len(vs)}")
            kept = []
            for v in vs:
                if not isinstance(v, Variable):
                    raise InvalidArgumentError(f"{info.type}: input '{name}' expects a Variable, "
                                               f"received {type(v).__name__}")
                if v.place is not place:    # a place is one object per device
                    if place is None:
                        place = v.place
                    elif v.place != place:
                        raise _mixed_places(info, inputs, name, v)
                d = v.desc
                if v._value is None:
                    raise InvalidArgumentError(f"{info.type}: input '{name}' ({d.name}) holds "
                                               f"no value")
                key.append(d.shape)
                key.append(d.dtype)
                if d.stop_gradient:
                    key.append(False)
                    kept.append(v if name in keeps else d)
                    continue
                key.append(True)
                requires_grad = True
                if v._tape and v._tape != self.serial:
                    raise PreconditionNotMetError(
                        f"{info.type}: input '{name}' ({d.name}) was computed on a tape that "
                        f"{_fate(v._tape)}, so no gradient can flow through it; call "
                        f"{d.name}.detach() to use its value as a constant")
                kept.append(v if name in keeps or not v._tape else d)
            entries[name] = kept
            arrays[name] = [v._value for v in vs] if duplicable else v._value
        if place is None:
            place = _places._default[0]
        if place is not _places.CPU:    # (most ops: no Place to hash)
            key.append(place)
        try:
            plan = info.plans.get(key := tuple(key))
        except TypeError:   # a list among the attributes: the checked ones are hashable
            plan = None
        if plan is None:
            plan = _infer(info, inputs, attrs, place, key)
        if _flags.checking and _flags.flags["FLAGS_check_nan_inf"]:
            outputs = _named_outputs(plan, outputs)     # named now, for the check's message
        result = invoke(plan, arrays, None, outputs)

        grad_flows = requires_grad and info.grad is not None and not _local.no_grad_depth
        record = grad_flows or self.tracing
        if record and self._spent:
            raise PreconditionNotMetError(
                f"{info.type}: this tape was spent by backward; call tape.reset_global_tape() "
                f"before recording a new computation")
        serial = self.serial if record else 0
        produced, outs = {}, {}
        for (slot, duplicable, spec, carries), value in zip(plan.outputs, result):
            if spec is None:
                continue
            given = outputs.get(slot) if outputs is not None else None
            values = value if duplicable else (value,)
            flows = grad_flows and carries
            if given:
                # A Variable written by an op that passes it no gradient (a feeder, an
                # optimizer's in-place update, batch norm's running statistics) keeps its own
                # stop_gradient: a parameter stays trainable, a statistic stays constant.
                for v, (shape, out_dtype), val in zip(given, spec, values):
                    d = v.desc
                    d.shape, d.dtype = shape, out_dtype
                    if flows:
                        d.stop_gradient = False
                    v._value, v._tape, v.place = val, serial, place
                vs = given
            elif len(spec) == 1:
                shape, out_dtype = spec[0]
                vs = [new_variable(VarDesc(next(_tmp_names), shape, out_dtype, False, not flows),
                                   values[0], serial, place)]
            else:
                vs = [new_variable(VarDesc(next(_tmp_names), shape, out_dtype, False, not flows),
                                   val, serial, place)
                      for (shape, out_dtype), val in zip(spec, values)]
            produced[slot] = vs
            if record:
                if slot in keeps:
                    outs[slot] = vs
                elif len(vs) == 1:
                    outs[slot] = [vs[0].desc]
                else:
                    outs[slot] = [v.desc for v in vs]
        if record:
            self._ops.append(OpHandle(plan, entries, outs))
        return produced

    def backward(self, loss: Variable) -> None:
        """Gradients of ``loss`` (seeded with ones) into ``.grad`` of the leaves that want them."""
        from .backward import run_backward
        if self._spent:
            raise PreconditionNotMetError(
                "backward was already run on this tape, which released its ops; call "
                "tape.reset_global_tape() and run the forward pass again")
        if loss._tape != self.serial:
            why = (f"was computed on an earlier tape, which {_fate(loss._tape)}" if loss._tape
                   else "was not computed from any Variable with stop_gradient=False")
            raise PreconditionNotMetError(f"backward: {loss.name} {why}, so it has no gradient "
                                          f"to propagate")
        ops, self._ops, self._spent = self._ops, [], True
        if len(_spent_serials) >= 4096:
            _spent_serials.clear()
        _spent_serials.add(self.serial)
        run_backward(ops, {loss.desc: loss.place.array_module().ones_like(loss._value)})


_spent_serials: set = set()     # tapes backward has spent (recent ones)


def _fate(serial: int) -> str:
    """What became of tape ``serial``, for an error about a Variable it computed."""
    if serial in _spent_serials:
        return "backward has spent (it released the ops a gradient would flow through)"
    return "has since been reset"


def _infer(info: OpInfo, inputs: dict, attrs, place, key: tuple) -> CallPlan:
    """The CallPlan of a signature not seen before: attributes checked (their normalised form
    keys the plan when the given ones are not hashable), then ``dispatch.infer``."""
    attrs, attrs_key = info.checked_attrs(attrs)
    try:
        hash(key)
    except TypeError:
        key = (attrs_key, *key[1:])
        plan = info.plans.get(key)
        if plan is not None:
            return plan
    descs = {name: [v.desc for v in vs] for name, vs in inputs.items() if vs}
    return infer(info, attrs, attrs_key, descs, place, key)


def _mixed_places(info: OpInfo, inputs: dict, slot: str, v: Variable) -> InvalidArgumentError:
    """The error for input ``v`` of ``slot`` living elsewhere than the op's first input."""
    first_slot, first = next((name, inputs[name][0]) for name, _, _ in info.slot_specs
                             if inputs.get(name))
    return InvalidArgumentError(
        f"{info.type}: input '{slot}' ({v.name}) is on {v.place} but input '{first_slot}' "
        f"({first.name}) is on {first.place}; an op runs on one place: move one of them with "
        f"Variable.to(place)")


def _named_outputs(plan: CallPlan, outputs: dict | None) -> dict:
    """``outputs`` completed with new, still empty Variables for the output slots it does not
    name, so that the NaN/Inf check after the kernel can name them; they are then filled in as
    given outputs are, which leaves them as new ones would be."""
    outputs = dict(outputs or {})
    for slot, _, spec, _ in plan.outputs:
        if not outputs.get(slot) and spec:
            outputs[slot] = [new_variable(VarDesc(next(_tmp_names), shape, dtype, False, True),
                                          None, 0) for shape, dtype in spec]
    return outputs


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
