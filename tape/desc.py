"""Compile-time descriptions: VarDesc, OpDesc, BlockDesc, ProgramDesc (framework.proto's model)."""
from __future__ import annotations

from . import dtypes


class VarDesc:
    """What shape inference and export know of a variable: name, shape (-1 = unknown), dtype."""

    __slots__ = ("name", "shape", "dtype", "persistable", "stop_gradient", "__weakref__")

    def __init__(self, name: str, shape=(), dtype: int = dtypes.FP32, persistable: bool = False,
                 stop_gradient: bool = True):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.persistable = persistable
        self.stop_gradient = stop_gradient

    def __repr__(self):
        return f"VarDesc({self.name}, shape={list(self.shape)}, dtype={dtypes.name(self.dtype)})"


class OpDesc:
    """One operator: type, ``{slot: [var names]}`` inputs and outputs, attributes."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "is_target")

    def __init__(self, type: str, inputs=None, outputs=None, attrs=None, is_target=False):
        self.type = type
        self.inputs = {k: list(v) for k, v in (inputs or {}).items()}
        self.outputs = {k: list(v) for k, v in (outputs or {}).items()}
        self.attrs = dict(attrs or {})
        self.is_target = is_target

    def input(self, slot: str) -> list:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list:
        return self.outputs.get(slot, [])

    def input_arg_names(self) -> list:
        return [n for names in self.inputs.values() for n in names]

    def output_arg_names(self) -> list:
        return [n for names in self.outputs.values() for n in names]

    def __repr__(self):
        ins = ", ".join(f"{k}={v}" for k, v in self.inputs.items())
        outs = ", ".join(f"{k}={v}" for k, v in self.outputs.items())
        return f"{outs} = {self.type}({ins})"


class BlockDesc:
    """A block: the VarDescs it declares and its ops in execution order."""

    __slots__ = ("idx", "parent_idx", "vars", "ops")

    def __init__(self, idx: int = 0, parent_idx: int = -1):
        self.idx = idx
        self.parent_idx = parent_idx
        self.vars: dict[str, VarDesc] = {}
        self.ops: list[OpDesc] = []

    def var(self, name: str) -> VarDesc:
        return self.vars[name]

    def add_var(self, desc: VarDesc) -> VarDesc:
        self.vars[desc.name] = desc
        return desc

    def append_op(self, op: OpDesc) -> OpDesc:
        self.ops.append(op)
        return op


class ProgramDesc:
    """A list of blocks; block 0 is the global block."""

    __slots__ = ("blocks",)

    def __init__(self):
        self.blocks = [BlockDesc(0, -1)]

    def block(self, idx: int) -> BlockDesc:
        return self.blocks[idx]

    def global_block(self) -> BlockDesc:
        return self.blocks[0]
