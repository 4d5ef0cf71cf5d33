"""Compile-time descriptions: OpDesc, BlockDesc, ProgramDesc (framework.proto's model; VarDesc
is ``tape.var_desc``'s, imported from here too), and their round trip through Paddle's wire
format.

``ProgramDesc.serialize_to_string()`` gives bytes that PaddlePaddle 3.x loads (with the export
profile: see ``set_paddle_versions``); ``ProgramDesc.parse_from_string(data)`` reads them back,
and reads what Paddle writes. Parsing only decodes protobuf fields and checks them: it never runs
code, and bad bytes raise InvalidArgumentError saying what was wrong.
"""
from __future__ import annotations

from .attribute import BLOCK, BLOCKS
from .errors import InvalidArgumentError
from .var_desc import (  # noqa: F401  (imported from here too)
    DENSE_TENSOR,
    DENSE_TENSOR_ARRAY,
    FEED_MINIBATCH,
    FETCH_LIST,
    SELECTED_ROWS,
    STEP_SCOPES,
    VarDesc,
)
from .wire import (
    COMMON_ATTRS,
    PADDLE_OP_VERSIONS,
    PADDLE_VERSION,
    infer_attr_type,
    proto_module,
    read_attr,
    write_attr,
)


class OpDesc:
    """One operator: type, ``{slot: [var names]}`` inputs and outputs, attributes.

    ``attr_types`` (``{name: AttrType}``, optional) fixes the wire type of attributes; parsing
    fills it so that a program re-serializes as it was read. Otherwise an attribute takes the
    type its registered op declares, else one inferred from its Python value.
    """

    __slots__ = ("type", "inputs", "outputs", "attrs", "is_target", "attr_types")

    def __init__(self, type: str, inputs=None, outputs=None, attrs=None, is_target=False,
                 attr_types=None):
        self.type = type
        self.inputs = {k: list(v) for k, v in (inputs or {}).items()}
        self.outputs = {k: list(v) for k, v in (outputs or {}).items()}
        self.attrs = dict(attrs or {})
        self.is_target = is_target
        self.attr_types = attr_types

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

    def __str__(self):
        def slots(d):
            return ", ".join(f"{k}=[{', '.join(v)}]" for k, v in d.items())
        attrs = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.attrs.items())
                          if k not in COMMON_ATTRS)
        return (f"{slots(self.outputs)} = {self.type}({slots(self.inputs)})"
                + (f"  {{{attrs}}}" if attrs else "") + ("  [target]" if self.is_target else ""))

    def attr_type(self, name: str) -> int:
        """The AttrType attribute ``name`` is written with (see the class doc)."""
        if self.attr_types and name in self.attr_types:
            return self.attr_types[name]
        from .registry import REGISTRY
        info = REGISTRY.get(self.type)
        if info is not None and name in info.attrs:
            return info.attrs[name].type
        if name in COMMON_ATTRS:
            return COMMON_ATTRS[name]
        return infer_attr_type(self.type, name, self.attrs[name])

    def to_proto(self):
        """This OpDesc as a ``framework_pb2.OpDesc`` message (attributes sorted by name, as
        Paddle writes them)."""
        m = proto_module().OpDesc(type=self.type)
        for slot, names in self.inputs.items():
            m.inputs.add(parameter=slot, arguments=names)
        for slot, names in self.outputs.items():
            m.outputs.add(parameter=slot, arguments=names)
        for name in sorted(self.attrs):
            write_attr(m.attrs.add(), self.type, name, self.attr_type(name), self.attrs[name])
        if self.is_target:
            m.is_target = True
        return m

    @classmethod
    def from_proto(cls, m, where: str = "") -> OpDesc:
        where = f"{where}op '{m.type}'"
        inputs, outputs = _slots(m.inputs, where, "input"), _slots(m.outputs, where, "output")
        attrs, types = {}, {}
        for a in m.attrs:
            if a.name in attrs:
                raise InvalidArgumentError(f"{where}: attribute '{a.name}' appears twice")
            attrs[a.name], types[a.name] = read_attr(a), a.type
        return cls(m.type, inputs, outputs, attrs, m.is_target, types)


def _short(value) -> str:
    if isinstance(value, tuple) and len(value) > 8:
        return "(" + ", ".join(map(repr, value[:8])) + f", ... {len(value)} items)"
    return repr(value)


def _slots(vars_, where: str, kind: str) -> dict:
    slots = {}
    for v in vars_:
        if v.parameter in slots:
            raise InvalidArgumentError(f"{where}: {kind} slot '{v.parameter}' appears twice")
        slots[v.parameter] = list(v.arguments)
    return slots


class BlockDesc:
    """A block: the VarDescs it declares and its ops in execution order."""

    __slots__ = ("idx", "parent_idx", "vars", "ops", "forward_block_idx")

    def __init__(self, idx: int = 0, parent_idx: int = -1, forward_block_idx: int = -1):
        self.idx = idx
        self.parent_idx = parent_idx
        self.vars: dict[str, VarDesc] = {}
        self.ops: list[OpDesc] = []
        self.forward_block_idx = forward_block_idx

    def var(self, name: str) -> VarDesc:
        return self.vars[name]

    def add_var(self, desc: VarDesc) -> VarDesc:
        self.vars[desc.name] = desc
        return desc

    def append_op(self, op: OpDesc) -> OpDesc:
        self.ops.append(op)
        return op

    def __str__(self):
        lines = [f"block {self.idx} (parent {self.parent_idx}"
                 + (f", forward block {self.forward_block_idx}" if self.forward_block_idx >= 0
                    else "") + f"): {len(self.vars)} vars, {len(self.ops)} ops"]
        lines += [f"  var {v}" for v in self.vars.values()]
        lines += [f"  {op}" for op in self.ops]
        return "\n".join(lines)

    def to_proto(self):
        m = proto_module().BlockDesc(idx=self.idx, parent_idx=self.parent_idx,
                            forward_block_idx=self.forward_block_idx)
        m.vars.extend(v.to_proto() for v in self.vars.values())
        m.ops.extend(op.to_proto() for op in self.ops)
        return m

    @classmethod
    def from_proto(cls, m) -> BlockDesc:
        block = cls(m.idx, m.parent_idx, m.forward_block_idx)
        where = f"block {m.idx}: "
        for v in m.vars:
            if v.name in block.vars:
                raise InvalidArgumentError(f"{where}var '{v.name}' is declared twice")
            block.vars[v.name] = VarDesc.from_proto(v, where)
        for i, op in enumerate(m.ops):
            block.ops.append(OpDesc.from_proto(op, f"{where}op #{i}, "))
        return block


class ProgramDesc:
    """A list of blocks; block 0 is the global block. ``version`` and ``op_version_map``
    (``{op type: version}``) are what Paddle's loaders read for compatibility."""

    __slots__ = ("blocks", "version", "op_version_map")

    def __init__(self):
        self.blocks = [BlockDesc(0, -1)]
        self.version = 0
        self.op_version_map: dict[str, int] = {}

    def block(self, idx: int) -> BlockDesc:
        return self.blocks[idx]

    def global_block(self) -> BlockDesc:
        return self.blocks[0]

    def set_paddle_versions(self) -> ProgramDesc:
        """Stamp the export profile's versions: ``version`` 3003001 (PaddlePaddle 3.3.1) and
        Paddle's whole op-version registry, which covers every op it versions. Returns self."""
        self.version = PADDLE_VERSION
        self.op_version_map = dict(PADDLE_OP_VERSIONS)
        return self

    def __str__(self):
        versioned = f", {len(self.op_version_map)} op versions" if self.op_version_map else ""
        return "\n".join([f"program (version {self.version}{versioned})"]
                         + [str(b) for b in self.blocks])

    def to_proto(self):
        pb = proto_module()
        m = pb.ProgramDesc()
        m.blocks.extend(b.to_proto() for b in self.blocks)
        m.version.version = self.version
        for name, version in self.op_version_map.items():
            pair = m.op_version_map.pair.add(op_name=name)
            pair.op_version.version = version
        return m

    def serialize_to_string(self) -> bytes:
        """The wire bytes (a ``.pdmodel`` file's content)."""
        m = self.to_proto()
        return m.SerializeToString()

    @classmethod
    def from_proto(cls, m) -> ProgramDesc:
        if not m.IsInitialized():
            missing = ", ".join(m.FindInitializationErrors()[:5])
            raise InvalidArgumentError(f"not a valid ProgramDesc: required field(s) missing: "
                                       f"{missing}")
        if not m.blocks:
            raise InvalidArgumentError("not a valid ProgramDesc: it has no block (block 0 is "
                                       "the global block)")
        program = cls()
        program.blocks = [BlockDesc.from_proto(b) for b in m.blocks]
        _check_block_links(program)
        program.version = m.version.version
        program.op_version_map = {p.op_name: p.op_version.version for p in m.op_version_map.pair}
        return program

    @classmethod
    def parse_from_string(cls, data) -> ProgramDesc:
        """A ProgramDesc from wire bytes; InvalidArgumentError saying what is wrong if the bytes
        are not a well-formed program."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"parse_from_string expects bytes, received "
                                       f"{type(data).__name__}")
        from google.protobuf.message import DecodeError
        m = proto_module().ProgramDesc()
        try:
            m.ParseFromString(bytes(data))
        except (DecodeError, ValueError, RecursionError) as e:
            raise InvalidArgumentError(f"cannot parse a ProgramDesc from {len(data)} bytes: the "
                                       f"data is truncated, corrupted or not a program ({e})"
                                       ) from None
        return cls.from_proto(m)


def _check_block_links(program: ProgramDesc) -> None:
    """Block indices must match positions, and every block reference must name a block."""
    n = len(program.blocks)
    for i, block in enumerate(program.blocks):
        where = f"not a valid ProgramDesc: block #{i}"
        if block.idx != i:
            raise InvalidArgumentError(f"{where} says idx {block.idx}; expected {i}")
        if not (-1 <= block.parent_idx < n and block.parent_idx != i) or (
                i == 0 and block.parent_idx != -1):
            raise InvalidArgumentError(f"{where} has parent_idx {block.parent_idx}; expected "
                                       f"-1 for block 0, else another of the {n} blocks")
        if not -1 <= block.forward_block_idx < n:
            raise InvalidArgumentError(f"{where} has forward_block_idx "
                                       f"{block.forward_block_idx}; the program has {n} blocks")
        for op in block.ops:
            for name, kind in (op.attr_types or {}).items():
                refs = op.attrs[name] if kind == BLOCKS else (op.attrs[name],)
                if kind in (BLOCK, BLOCKS) and not all(0 <= r < n for r in refs):
                    raise InvalidArgumentError(f"{where}, op '{op.type}': attribute '{name}' "
                                               f"refers to block(s) {refs}; the program has "
                                               f"{n} blocks")


GRAD_SUFFIX = "@GRAD"


def grad_name(name: str) -> str:
    """``x`` -> ``x@GRAD``."""
    return name + GRAD_SUFFIX
