"""Compile-time descriptions: VarDesc, OpDesc, BlockDesc, ProgramDesc (framework.proto's model),
and their round trip through Paddle's wire format.

``ProgramDesc.serialize_to_string()`` gives bytes that PaddlePaddle 3.x loads (with the export
profile: see ``set_paddle_versions``); ``ProgramDesc.parse_from_string(data)`` reads them back,
and reads what Paddle writes. Parsing only decodes protobuf fields and checks them: it never runs
code, and bad bytes raise InvalidArgumentError saying what was wrong.
"""
from __future__ import annotations

import numbers

from . import dtypes
from .attribute import (
    ATTR_TYPE_NAMES,
    BLOCK,
    BLOCKS,
    BOOLEAN,
    BOOLEANS,
    FLOAT,
    FLOATS,
    INT,
    INTS,
    LONG,
    LONGS,
    STRING,
    STRINGS,
)
from .errors import InvalidArgumentError

# VarType.Type: the kinds of variable (the element types are in tape.dtypes)
DENSE_TENSOR, SELECTED_ROWS, FEED_MINIBATCH, FETCH_LIST = 7, 8, 9, 10
DENSE_TENSOR_ARRAY = 13
_KIND_NAMES = {DENSE_TENSOR: "DENSE_TENSOR", SELECTED_ROWS: "SELECTED_ROWS",
               FEED_MINIBATCH: "FEED_MINIBATCH", FETCH_LIST: "FETCH_LIST",
               DENSE_TENSOR_ARRAY: "DENSE_TENSOR_ARRAY"}
# VarType field describing the tensor of each variable kind that has one
_TENSOR_FIELDS = {DENSE_TENSOR: "dense_tensor", SELECTED_ROWS: "selected_rows",
                  DENSE_TENSOR_ARRAY: "tensor_array"}
# element types a TensorDesc may name (VarType.Type values that are not variable kinds)
_ELEMENT_TYPES = frozenset((0, 1, 2, 3, 4, 5, 6, 19, 20, 21, 22, 23, 24, 32, 33, 36, 37, 38))

# AttrType values past those of tape.attribute (Paddle 3.x additions)
FLOAT64S, VAR, VARS, FLOAT64, SCALAR, SCALARS = range(12, 18)
_ATTR_NAMES = ATTR_TYPE_NAMES + ("FLOAT64S", "VAR", "VARS", "FLOAT64", "SCALAR", "SCALARS")
# OpDesc.Attr field holding each type's value, and whether it is repeated
_ATTR_FIELDS = {INT: ("i", False), FLOAT: ("f", False), STRING: ("s", False),
                INTS: ("ints", True), FLOATS: ("floats", True), STRINGS: ("strings", True),
                BOOLEAN: ("b", False), BOOLEANS: ("bools", True), BLOCK: ("block_idx", False),
                LONG: ("l", False), BLOCKS: ("blocks_idx", True), LONGS: ("longs", True),
                FLOAT64S: ("float64s", True), VAR: ("var_name", False),
                VARS: ("vars_name", True), FLOAT64: ("float64", False),
                SCALAR: ("scalar", False), SCALARS: ("scalars", True)}
# Attributes Paddle puts on every op (not in the ops' own protos); printing leaves them out.
_COMMON_ATTRS = {"op_role": INT, "op_role_var": STRINGS, "op_namescope": STRING,
                 "op_callstack": STRINGS, "op_device": STRING, "with_quant_attr": BOOLEAN}

# What PaddlePaddle 3.3.1 writes in ProgramDesc.version and op_version_map (its whole registry).
PADDLE_VERSION = 3003001
PADDLE_OP_VERSIONS = {
    "affine_grid": 1, "allclose": 2, "argsort": 1, "assign_value": 1, "auc": 1, "clip": 1,
    "coalesce_tensor": 2, "collect_fpn_proposals": 1, "conv2d": 1, "conv2d_transpose": 2,
    "conv3d": 1, "conv3d_transpose": 1, "cumprod": 1, "cumsum": 1, "depthwise_conv2d": 1,
    "depthwise_conv2d_transpose": 1, "dequantize": 1, "distribute_fpn_proposals": 2,
    "elementwise_add": 1, "elementwise_div": 1, "elementwise_mul": 1, "elementwise_pow": 1,
    "elementwise_sub": 1, "equal": 1, "fake_channel_wise_quantize_abs_max": 1,
    "fill_constant": 2, "flip": 1, "for_pybind_test__": 4, "gather": 1, "generate_proposals": 2,
    "generate_proposals_v2": 1, "global_gather": 1, "global_scatter": 1, "greater_equal": 1,
    "greater_than": 1, "grid_sampler": 1, "hard_shrink": 1, "histogram": 1, "instance_norm": 1,
    "kldiv_loss": 1, "lamb": 1, "leaky_relu": 1, "less_equal": 1, "less_than": 1, "linspace": 1,
    "lookup_table": 1, "lookup_table_v2": 1, "lstsq": 1, "matmul": 1, "matrix_nms": 1,
    "max_pool2d_with_index": 1, "max_pool3d_with_index": 1, "momentum": 1,
    "moving_average_abs_max_scale": 2, "not_equal": 1, "p_norm": 1, "partial_allgather": 1,
    "pixel_shuffle": 1, "print": 1, "quantize": 2, "requantize": 1, "roi_align": 3,
    "roi_pool": 2, "roll": 2, "round": 1, "seed": 1, "set_value": 4, "softplus": 1,
    "thresholded_relu": 1, "trace": 1, "truncated_gaussian_random": 1, "unique_consecutive": 1,
    "weight_dequantize": 1, "weight_only_linear": 1, "weight_quantize": 1, "yolo_box": 1,
}


def _pb():
    """The generated protobuf module, imported on first use: ``import tape`` stays fast."""
    from . import framework_pb2
    return framework_pb2


class VarDesc:
    """What shape inference and export know of a variable: name, shape (-1 = unknown), dtype.

    ``type`` is the variable's kind (DENSE_TENSOR; FEED_MINIBATCH / FETCH_LIST for the feed and
    fetch holders, which have no shape or dtype); ``need_check_feed`` marks a fed input whose
    shape and dtype the loader checks.
    """

    __slots__ = ("name", "shape", "dtype", "persistable", "stop_gradient", "type",
                 "need_check_feed", "__weakref__")

    def __init__(self, name: str, shape=(), dtype: int = dtypes.FP32, persistable: bool = False,
                 stop_gradient: bool = True, type: int = DENSE_TENSOR,
                 need_check_feed: bool = False):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.persistable = persistable
        self.stop_gradient = stop_gradient
        self.type = type
        self.need_check_feed = need_check_feed

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
        m = _pb().VarDesc(name=self.name, persistable=self.persistable)
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
            if any(d < -1 for d in tensor.dims):
                raise InvalidArgumentError(f"{where}: dims {list(tensor.dims)} must each be "
                                           f">= 0, or -1 for unknown")
            shape, dtype = tuple(tensor.dims), tensor.data_type
        return cls(m.name, shape, dtype, m.persistable, m.stop_gradient, kind, m.need_check_feed)


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
                          if k not in _COMMON_ATTRS)
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
        if name in _COMMON_ATTRS:
            return _COMMON_ATTRS[name]
        return _infer_attr_type(self.type, name, self.attrs[name])

    def to_proto(self):
        """This OpDesc as a ``framework_pb2.OpDesc`` message (attributes sorted by name, as
        Paddle writes them)."""
        m = _pb().OpDesc(type=self.type)
        for slot, names in self.inputs.items():
            m.inputs.add(parameter=slot, arguments=names)
        for slot, names in self.outputs.items():
            m.outputs.add(parameter=slot, arguments=names)
        for name in sorted(self.attrs):
            _write_attr(m.attrs.add(), self.type, name, self.attr_type(name), self.attrs[name])
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
            attrs[a.name], types[a.name] = _read_attr(a), a.type
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


def _infer_attr_type(op_type: str, name: str, value) -> int:
    """The AttrType of a Python value, for an attribute no registered op declares."""
    def scalar(v):
        if isinstance(v, bool) or type(v).__name__ == "bool_":
            return BOOLEAN
        if isinstance(v, numbers.Integral):
            return INT if -2**31 <= v < 2**31 else LONG
        if isinstance(v, numbers.Real):
            return FLOAT
        if isinstance(v, str):
            return STRING
        return None
    if isinstance(value, (list, tuple)):
        kinds = {scalar(v) for v in value} or {INT}
        if LONG in kinds and kinds <= {INT, LONG}:
            kinds = {LONG}
        if kinds == {FLOAT, INT}:
            kinds = {FLOAT}
        kind = kinds.pop() if len(kinds) == 1 else None
        found = {INT: INTS, LONG: LONGS, FLOAT: FLOATS, STRING: STRINGS, BOOLEAN: BOOLEANS}.get(
            kind)
    else:
        found = scalar(value)
    if found is None:
        raise InvalidArgumentError(f"op '{op_type}': cannot tell the wire type of attribute "
                                   f"'{name}' from its value {value!r}; expected a bool, int, "
                                   f"float, str or a list of one of them")
    return found


def _write_attr(a, op_type: str, name: str, kind: int, value) -> None:
    a.name, a.type = name, kind
    field, repeated = _ATTR_FIELDS[kind]
    try:
        if kind == SCALAR:
            _write_scalar(a.scalar, value)
        elif kind == SCALARS:
            for v in value:
                _write_scalar(a.scalars.add(), v)
        elif repeated:
            getattr(a, field).extend(value)
        else:
            setattr(a, field, value)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"op '{op_type}': attribute '{name}' ({_ATTR_NAMES[kind]}) "
                                   f"cannot hold {value!r}: {e}") from None


def _write_scalar(s, value) -> None:
    if isinstance(value, bool):
        s.type, s.b = 1, value
    elif isinstance(value, numbers.Integral):
        s.type, s.i = 2, value
    elif isinstance(value, numbers.Real):
        s.type, s.r = 3, value
    elif isinstance(value, complex):
        s.type = 4
        s.c.r, s.c.i = value.real, value.imag
    else:
        raise TypeError(f"{type(value).__name__} is not a scalar")


def _read_attr(a):
    field, repeated = _ATTR_FIELDS[a.type]
    if a.type == SCALAR:
        return _read_scalar(a.scalar)
    if a.type == SCALARS:
        return tuple(_read_scalar(s) for s in a.scalars)
    value = getattr(a, field)
    return tuple(value) if repeated else value


def _read_scalar(s):
    if s.type == 4:
        return complex(s.c.r, s.c.i)
    return {1: s.b, 2: s.i, 3: s.r}[s.type]


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
        m = _pb().BlockDesc(idx=self.idx, parent_idx=self.parent_idx,
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
        pb = _pb()
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
        m = _pb().ProgramDesc()
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
