"""Compile-time descriptions: VarDesc, OpDesc, BlockDesc, ProgramDesc (framework.proto's model),
and their round trip through Paddle's wire format.

``ProgramDesc.serialize_to_string()`` gives bytes that PaddlePaddle 3.x loads (with the export
profile: see ``set_paddle_versions``); ``ProgramDesc.parse_from_string(data)`` reads them back,
and reads what Paddle writes. Parsing only decodes protobuf fields and checks them: it never runs
code, and bad bytes raise InvalidArgumentError saying what was wrong.
"""
from __future__ import annotations

from . import dtypes
from .attribute import BLOCK, BLOCKS
from .errors import InvalidArgumentError
from .names import name_source
from .wire import (
    COMMON_ATTRS,
    PADDLE_OP_VERSIONS,
    PADDLE_VERSION,
    infer_attr_type,
    proto_module,
    read_attr,
    write_attr,
)

# VarType.Type: the kinds of variable (the element types are in tape.dtypes)
DENSE_TENSOR, SELECTED_ROWS, FEED_MINIBATCH, FETCH_LIST = 7, 8, 9, 10
STEP_SCOPES, DENSE_TENSOR_ARRAY = 11, 13
_KIND_NAMES = {DENSE_TENSOR: "DENSE_TENSOR", SELECTED_ROWS: "SELECTED_ROWS",
               FEED_MINIBATCH: "FEED_MINIBATCH", FETCH_LIST: "FETCH_LIST",
               STEP_SCOPES: "STEP_SCOPES", DENSE_TENSOR_ARRAY: "DENSE_TENSOR_ARRAY"}
# VarType field describing the tensor of each variable kind that has one
_TENSOR_FIELDS = {DENSE_TENSOR: "dense_tensor", SELECTED_ROWS: "selected_rows",
                  DENSE_TENSOR_ARRAY: "tensor_array"}
# element types a TensorDesc may name (VarType.Type values that are not variable kinds)
_ELEMENT_TYPES = frozenset((0, 1, 2, 3, 4, 5, 6, 19, 20, 21, 22, 23, 24, 32, 33, 36, 37, 38))

_temporary_names = name_source("tmp")
_new_object = object.__new__


class VarDesc:
    """What shape inference and export know of a variable: name, shape (-1 = unknown), dtype.

    ``type`` is the variable's kind (DENSE_TENSOR; FEED_MINIBATCH / FETCH_LIST for the feed and
    fetch holders, which have no shape or dtype); ``need_check_feed`` marks a fed input whose
    shape and dtype the loader checks.
    """

    # ``persistable``, ``type`` and ``need_check_feed`` are properties over the ``_``-named
    # slots (below the class): an op's new output leaves those unset and reads the defaults,
    # three stores less per eager op; what sets one (a parameter, a feed) stores it.
    __slots__ = ("_name", "shape", "dtype", "stop_gradient", "_persistable", "_type",
                 "_need_check_feed", "__weakref__")

    def __init__(self, name: str, shape=(), dtype: int = dtypes.FP32, persistable: bool = False,
                 stop_gradient: bool = True, type: int = DENSE_TENSOR,
                 need_check_feed: bool = False):
        self._name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self._persistable = persistable
        self.stop_gradient = stop_gradient
        self._type = type
        self._need_check_feed = need_check_feed

    @classmethod
    def temporary(cls, shape: tuple, dtype: int, stop_gradient: bool) -> VarDesc:
        """The VarDesc of an op's new output (the eager hot path): named ``tmp_<n>`` when its
        name is first asked for, which most temporaries never are."""
        d = _new_object(cls)
        d._name = None
        d.shape = shape
        d.dtype = dtype
        d.stop_gradient = stop_gradient
        return d

    @property
    def name(self) -> str:
        name = self._name
        if name is None:
            name = self._name = next(_temporary_names)
        return name

    @name.setter
    def name(self, name: str) -> None:
        self._name = name

    def __copy__(self) -> VarDesc:
        """A copy describes the same variable: a temporary is named first, so both have that
        name."""
        copy = _new_object(type(self))
        copy._name = self.name
        for field in _FIELDS:
            setattr(copy, field, getattr(self, field))
        return copy

    def __deepcopy__(self, memo) -> VarDesc:
        return self.__copy__()      # every field is immutable

    def __repr__(self):
        return f"VarDesc({self.name}, shape={list(self.shape)}, dtype={dtypes.name(self.dtype)})"

    def __str__(self):
        kind = _KIND_NAMES.get(self.type, f"VarType({self.type})")
        what = kind
        if self.type in _TENSOR_FIELDS:
            what = f"{dtypes.name(self.dtype)}{list(self.shape)}" + (
                "" if self.type == DENSE_TENSOR else f" ({kind})")
        return f"{self.name}: {what}" + "".join(
            f" {flag}" for flag in ("persistable", "need_check_feed") if getattr(self, flag))

    def to_proto(self):
        """This VarDesc as a ``framework_pb2.VarDesc`` message."""
        m = proto_module().VarDesc(name=self.name, persistable=self.persistable)
        m.type.type = self.type
        field = _TENSOR_FIELDS.get(self.type)
        if field is not None:
            holder = getattr(m.type, field)
            tensor = holder if self.type == SELECTED_ROWS else holder.tensor
            tensor.data_type = self.dtype
            tensor.dims.extend(self.shape)
            if self.type != SELECTED_ROWS:
                holder.legacy_lod_level = 0
        if self.need_check_feed:
            m.need_check_feed = True
        if self.stop_gradient:
            m.stop_gradient = True
        return m

    @classmethod
    def from_proto(cls, m, where: str = "") -> VarDesc:
        """A VarDesc from a ``framework_pb2.VarDesc``, checking what Tape relies on."""
        where = f"{where}var '{m.name}'"
        kind = m.type.type
        shape, dtype = (), dtypes.FP32
        field = _TENSOR_FIELDS.get(kind)
        if field is not None:
            if not m.type.HasField(field):
                raise InvalidArgumentError(f"{where}: a {_KIND_NAMES[kind]} variable needs its "
                                           f"'{field}' description (data_type and dims)")
            holder = getattr(m.type, field)
            tensor = holder if kind == SELECTED_ROWS else holder.tensor
            if kind != SELECTED_ROWS and holder.legacy_lod_level != 0:
                raise InvalidArgumentError(f"{where}: legacy_lod_level {holder.legacy_lod_level}"
                                           f" is not supported (LoD tensors); expected 0")
            if tensor.data_type not in _ELEMENT_TYPES:
                raise InvalidArgumentError(f"{where}: data_type {tensor.data_type} is a "
                                           f"variable kind, not an element type")
            # Paddle's shape inference multiplies an unknown -1 by known sides and saves the
            # product (cumsum's flattened -24, instance_norm's SavedMean -C): any negative side
            # is unknown, as Paddle reads it.
            shape, dtype = tuple(-1 if d < 0 else d for d in tensor.dims), tensor.data_type
        return cls(m.name, shape, dtype, m.persistable, m.stop_gradient, kind, m.need_check_feed)


def _defaulted(member, default) -> property:
    """A VarDesc field stored in slot ``member`` (a member descriptor), ``default`` while the
    slot is unset."""
    def get(self):
        try:
            return member.__get__(self, VarDesc)
        except AttributeError:
            return default
    return property(get, member.__set__)


VarDesc.persistable = _defaulted(VarDesc._persistable, False)
VarDesc.type = _defaulted(VarDesc._type, DENSE_TENSOR)
VarDesc.need_check_feed = _defaulted(VarDesc._need_check_feed, False)
_FIELDS = ("shape", "dtype", "persistable", "stop_gradient", "type", "need_check_feed")


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
