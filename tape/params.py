"""Paddle's combined parameter file (``save_combine`` / ``.pdiparams``): tensor records back to
back, with no header, no names and no count. The reader assigns records, in order, to the
variables it expects; Paddle saves and loads a program's persistable variables sorted by name.

A record, all integers little-endian::

    u32 0 (format version) | u64 0 (LoD levels) | u32 0 (tensor version) | i32 N |
    N bytes: VarType.TensorDesc{data_type, dims} | the elements, C order

Reading checks every length against what the file still holds before it allocates or reads, so
a truncated or hostile file raises InvalidArgumentError naming the record, never allocates
more than the file's size and never hangs.
"""
from __future__ import annotations

import math
import os
import stat
import struct

import numpy as np

from . import dtypes
from .atomic import atomic_open
from .errors import InvalidArgumentError, NotFoundError
from .place import host_array

_PREFIX = struct.Struct("<IQ")       # format version, LoD levels
_TENSOR_HEAD = struct.Struct("<Ii")  # tensor version, TensorDesc byte length
# A TensorDesc is a dtype and the dims: a few bytes per dim. Anything longer is not one.
MAX_DESC_BYTES = 4096


def _tensor_desc(**fields):
    """A ``VarType.TensorDesc`` message (protobuf is imported on first use)."""
    from .framework_pb2 import VarType
    return VarType.TensorDesc(**fields)


def record_header(shape, dtype: int) -> bytes:
    """Everything of a record before its elements, for a tensor of ``shape`` and ``dtype``."""
    desc = _tensor_desc(data_type=dtype, dims=shape).SerializeToString()
    return _PREFIX.pack(0, 0) + _TENSOR_HEAD.pack(0, len(desc)) + desc


def write_tensors(f, arrays, as_fp16: bool = False) -> None:
    """Write ``arrays`` to the binary file ``f`` as records, in order (``as_fp16``: floating
    arrays stored as float16)."""
    for a in arrays:
        a = host_array(a)
        if as_fp16 and a.dtype.kind == "f":
            a = a.astype(np.float16)
        try:
            code = dtypes.from_numpy(a.dtype)
        except KeyError:
            raise InvalidArgumentError(f"cannot save an array of dtype {a.dtype}; expected one "
                                       f"of {[dtypes.name(c) for c in dtypes.ALL]}") from None
        f.write(record_header(a.shape, code))
        f.write(np.ascontiguousarray(a, a.dtype.newbyteorder("<")).data)


def save_combined(path, arrays, as_fp16: bool = False, overwrite: bool = True) -> None:
    """Write ``arrays`` in the given order as one combined file, atomically."""
    with atomic_open(path, overwrite) as f:
        write_tensors(f, arrays, as_fp16)


def save_params(path, params: dict, order=None) -> list:
    """Write ``{name: array}`` as one combined file, atomically, in ``order`` (default: sorted
    names, Paddle's order). Returns the names in file order."""
    names = sorted(params) if order is None else list(order)
    save_combined(path, [params[n] for n in names])
    return names


def read_headers(path, expected=None) -> list:
    """``[(shape, dtype code)]`` of the records of a combined file, without reading elements;
    checked against ``expected`` as in load_combined."""
    return [spec for spec, _ in _records(path, expected, load=False)]


def load_combined(path, expected=None, load_as_fp16: bool = False) -> list:
    """The arrays of a combined file, in order. ``expected``, a list of ``(name, shape, dtype
    code)`` (-1 dims match anything), must describe the records exactly: their number, shapes
    and dtypes. Without it every record is read. ``load_as_fp16``: floating arrays become
    float16."""
    arrays = [a for _, a in _records(path, expected, load=True)]
    if load_as_fp16:
        arrays = [a.astype(np.float16) if a.dtype.kind == "f" else a for a in arrays]
    return arrays


def load_params(path, expected) -> dict:
    """``{name: array}`` from a combined file holding exactly the ``expected`` records
    (``[(name, shape, dtype code)]``, in file order)."""
    return dict(zip((name for name, _, _ in expected), load_combined(path, expected)))


def open_regular(path, what: str = "parameter file"):
    """Open ``path`` for reading; only a regular file (a FIFO or a device could block or never
    end). ``what`` names the file in the errors."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NotFoundError(f"{what} {path} does not exist") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidArgumentError(f"{what} {path} is not a regular file")
    return open(path, "rb")


def _records(path, expected, load: bool):
    """Yield ``((shape, dtype), array or None)`` per record; see load_combined."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        reader = _Reader(f, size, os.fspath(path))
        index = 0
        while (index < len(expected)) if expected is not None else (reader.remaining() > 0):
            name = expected[index][0] if expected is not None else None
            if expected is not None and reader.remaining() == 0:
                raise InvalidArgumentError(
                    f"parameter file {path} ends after {index} records, but {len(expected)} "
                    f"are expected; the first missing one is '{name}'")
            reader.where = f"parameter file {path}, record {index}" + (
                f" ('{name}')" if name else "")
            shape, dtype = reader.header()
            if expected is not None:
                _check_expected(reader.where, shape, dtype, expected[index])
            yield (shape, dtype), reader.elements(shape, dtype, load)
            index += 1
        if reader.remaining():
            raise InvalidArgumentError(
                f"parameter file {path} holds {reader.remaining()} more bytes after the "
                f"{index} records expected: the file does not match the program (more "
                f"parameters, or trailing garbage)")


class _Reader:
    """Reads one record at a time, bounds-checking every length against the file's size."""

    def __init__(self, f, size: int, path: str):
        self.f, self.size, self.path = f, size, path
        self.where = f"parameter file {path}"

    def remaining(self) -> int:
        return self.size - self.f.tell()

    def take(self, n: int, what: str) -> bytes:
        if n > self.remaining():
            raise InvalidArgumentError(f"{self.where}: truncated: {what} needs {n} bytes, the "
                                       f"file holds {self.remaining()} more")
        data = self.f.read(n)
        if len(data) != n:
            raise InvalidArgumentError(f"{self.where}: the file shrank while being read")
        return data

    def header(self) -> tuple:
        version, lod_levels = _PREFIX.unpack(self.take(_PREFIX.size, "the record header"))
        if version != 0:
            raise InvalidArgumentError(f"{self.where}: format version {version}, expected 0 "
                                       f"(not a save_combine file, or a corrupted one)")
        if lod_levels != 0:
            raise InvalidArgumentError(f"{self.where}: {lod_levels} LoD levels; LoD tensors are "
                                       f"not supported (expected 0)")
        version, n = _TENSOR_HEAD.unpack(self.take(_TENSOR_HEAD.size, "the tensor header"))
        if version != 0:
            raise InvalidArgumentError(f"{self.where}: tensor version {version}, expected 0")
        if not 0 < n <= MAX_DESC_BYTES:
            raise InvalidArgumentError(f"{self.where}: TensorDesc length {n} is not in "
                                       f"[1, {MAX_DESC_BYTES}]")
        return self._tensor_desc(self.take(n, "the TensorDesc"))

    def _tensor_desc(self, data: bytes) -> tuple:
        from google.protobuf.message import DecodeError
        desc = _tensor_desc()
        try:
            desc.ParseFromString(data)
        except DecodeError as e:
            raise InvalidArgumentError(f"{self.where}: corrupted TensorDesc ({e})") from None
        if not desc.IsInitialized():
            raise InvalidArgumentError(f"{self.where}: corrupted TensorDesc (no data_type)")
        if not dtypes.is_valid(desc.data_type):
            raise InvalidArgumentError(f"{self.where}: data type {desc.data_type} is not "
                                       f"supported; expected one of "
                                       f"{[dtypes.name(c) for c in dtypes.ALL]}")
        if any(d < 0 for d in desc.dims):
            raise InvalidArgumentError(f"{self.where}: dims {list(desc.dims)} must be >= 0")
        return tuple(desc.dims), desc.data_type

    def elements(self, shape, dtype: int, load: bool):
        item = dtypes.to_numpy(dtype).newbyteorder("<")
        n = math.prod(shape) * item.itemsize
        if n > self.remaining():
            raise InvalidArgumentError(f"{self.where}: truncated: {dtypes.name(dtype)} "
                                       f"{list(shape)} needs {n} bytes of data, the file holds "
                                       f"{self.remaining()} more")
        if not load:
            self.f.seek(n, os.SEEK_CUR)
            return None
        array = np.empty(shape, item)
        if self.f.readinto(array.reshape(-1).view(np.uint8)) != n:
            raise InvalidArgumentError(f"{self.where}: the file shrank while being read")
        return array.astype(item.newbyteorder("="), copy=False)


def _check_expected(where: str, shape, dtype: int, spec) -> None:
    _, want_shape, want_dtype = spec
    fits = len(shape) == len(want_shape) and all(w in (-1, d) for d, w in zip(shape, want_shape))
    if not fits or dtype != want_dtype:
        raise InvalidArgumentError(
            f"{where}: holds {dtypes.name(dtype)} {list(shape)} but the program declares "
            f"{dtypes.name(want_dtype)} {list(want_shape)}")
