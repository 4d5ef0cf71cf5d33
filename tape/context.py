"""What a shape rule sees of the op it serves."""
from __future__ import annotations

from .desc import VarDesc
from .errors import InvalidArgumentError


class InferShapeContext:
    """What a shape rule sees: the op's attributes and the VarDescs of its inputs.

    Bound to a temporary block (the eager tape) or to a real BlockDesc (static mode); a rule
    reads input VarDescs, validates them and sets ``(shape, dtype)`` for each output.
    """

    __slots__ = ("op_type", "ins", "attrs", "outs", "declared")

    def __init__(self, op_type: str, ins: dict, attrs: dict, declared: dict | None = None):
        self.op_type = op_type
        self.ins = ins            # {slot: [VarDesc]}
        self.attrs = attrs
        self.outs = {}            # {slot: [(shape, dtype)]}
        # {slot: [VarDesc]} of outputs a program already declares (static mode), else None:
        # for rules that cannot know an output's shape from the inputs (load_combine).
        self.declared = declared

    def input(self, slot: str) -> VarDesc:
        return self.ins[slot][0]

    def inputs(self, slot: str) -> list:
        return self.ins.get(slot, [])

    def has_input(self, slot: str) -> bool:
        return bool(self.ins.get(slot))

    def set_output(self, slot: str, shape, dtype: int) -> None:
        self.outs[slot] = [(tuple(shape), dtype)]

    def set_outputs(self, slot: str, specs) -> None:
        self.outs[slot] = [(tuple(s), d) for s, d in specs]

    def error(self, message: str) -> InvalidArgumentError:
        """An error to raise, prefixed with the op type: ``raise ctx.error("X ...")``."""
        return InvalidArgumentError(f"{self.op_type}: {message}")
