"""What the tape records per op: OpHandle, and EagerHandle, the lean form eager runners record."""
from __future__ import annotations

from .dispatch import CallPlan
from .registry import OpInfo


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


def _slot_view(slot: str, which: int) -> property:
    """An EagerHandle's ``inputs`` (``which`` 0) or ``outputs`` (1) as ``{slot: [entry]}``,
    made from its entries when first read and then kept in OpHandle's slot of that name (both
    at once: a reader of one, backward, reads the other too, and each first read costs a
    caught AttributeError)."""
    kept = OpHandle.__dict__[slot]

    def view(self) -> dict:
        try:
            return kept.__get__(self)
        except AttributeError:
            made = self._slots()
            _INPUTS.__set__(self, made[0])
            _OUTPUTS.__set__(self, made[1])
            return made[which]

    return property(view, doc=f"``{{slot: [entry]}}`` of the op's {slot}.")


_INPUTS, _OUTPUTS = OpHandle.__dict__["inputs"], OpHandle.__dict__["outputs"]


class EagerHandle(OpHandle):
    """An OpHandle recorded by an eager runner: its entries in one tuple, ``entries``, laid out
    as ``entry_layout(plan)`` says (the inputs' in the op's slot order, then the outputs'),
    which eager backward reads by position. ``inputs`` and ``outputs`` are made from it when
    first asked for (export, ``memory_report``, lazy backward of a mixed tape).

    Why not two dicts and a list per slot: every one of them is an object Python's cycle
    collector tracks for as long as the tape lives (a Tree-LSTM step records ~700 ops); one
    tuple per op halves what each collection walks, and what an op allocates.
    """

    __slots__ = ("entries",)

    # made by a runner as ``EagerHandle()``, then filled in: object's own __init__ lets the
    # class call skip a Python frame (and costs less than ``object.__new__(EagerHandle)``)
    __init__ = object.__init__

    inputs = _slot_view("inputs", 0)
    outputs = _slot_view("outputs", 1)

    def _slots(self) -> tuple:
        entries, at, slots = self.entries, 0, ({}, {})
        for layout, by_slot in zip(entry_layout(self.plan), slots):
            for slot, n in layout:
                by_slot[slot] = list(entries[at:at + n])
                at += n
        return slots


def entry_layout(plan: CallPlan) -> tuple:
    """``(((input slot, count), ...), ((output slot, count), ...))``: how an EagerHandle of
    ``plan`` lays out its entries. The plan's signature fixes it: which optional input slots
    were given and how many Variables each duplicable one took (``wants_grad`` has one flag
    per Variable of each given slot), and which outputs the shape rule described. Made once
    per plan (``CallPlan.layout``)."""
    layout = plan.layout
    if layout is None:
        wants = plan.wants_grad
        ins = tuple((slot, len(wants[slot])) for slot in plan.info.input_names if slot in wants)
        outs = tuple((slot, len(specs)) for slot, _, specs, _ in plan.outputs
                     if specs is not None)
        layout = plan.layout = (ins, outs)
    return layout
