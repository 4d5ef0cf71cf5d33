"""VarDesc: one variable's compile-time description (framework.proto's VarDesc) and its round
trip through Paddle's wire format; the variable kinds (VarType.Type) it may have."""
from __future__ import annotations

from . import dtypes
from .errors import InvalidArgumentError
from .names import name_source
from .wire import proto_module

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
    # three stores less per eager op; what sets one (a parameter, a feed) stores it. So is
    # ``name``: an op's new output leaves ``_name`` unset, named when first asked.
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
        d.shape = shape
        d.dtype = dtype
        d.stop_gradient = stop_gradient
        return d

    @property
    def name(self) -> str:
        try:
            name = self._name
        except AttributeError:      # (a new output's: never set, a store less per op)
            name = None
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
