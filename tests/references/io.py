"""References for save_combine / load_combine: an independent reader of the combined file
(struct and a hand-decoded TensorDesc, per PARAMS_FORMAT.md), checking the round trip."""
import struct

import numpy as np

_NUMPY = {0: np.bool_, 1: np.int16, 2: np.int32, 3: np.int64, 4: np.float16, 5: np.float32,
          6: np.float64, 20: np.uint8, 21: np.int8}


def _varint(data: bytes, pos: int):
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _tensor_desc(data: bytes):
    """(numpy dtype, dims) of a TensorDesc: ``08 <data_type>`` then ``10 <dim>`` per dim."""
    pos, dtype, dims = 0, None, []
    while pos < len(data):
        key, pos = _varint(data, pos)
        value, pos = _varint(data, pos)
        if key == 0x08:
            dtype = _NUMPY[value]
        elif key == 0x10:
            dims.append(value)
        else:
            raise AssertionError(f"unexpected TensorDesc field key {key:#x}")
    return np.dtype(dtype), tuple(dims)


def read_combined(path) -> list:
    """Every record of a combined file, as arrays."""
    data = open(path, "rb").read()
    pos, arrays = 0, []
    while pos < len(data):
        version, lod_levels, tensor_version, n = struct.unpack_from("<IQIi", data, pos)
        assert (version, lod_levels, tensor_version) == (0, 0, 0), (version, lod_levels)
        dtype, dims = _tensor_desc(data[pos + 20:pos + 20 + n])
        pos += 20 + n
        size = int(np.prod(dims)) * dtype.itemsize
        arrays.append(np.frombuffer(data[pos:pos + size], dtype.newbyteorder("<")).reshape(dims))
        pos += size
    return arrays


def save_combine(X, file_path, save_as_fp16):
    """Checks the file the op wrote (the op has no output but the file)."""
    stored = read_combined(file_path)
    assert len(stored) == len(X), f"{len(stored)} records for {len(X)} inputs"
    for got, x in zip(stored, X):
        want = x.astype(np.float16) if save_as_fp16 and x.dtype.kind == "f" else x
        assert got.shape == x.shape, f"record shape {got.shape}, input {x.shape}"
        assert got.dtype.kind == want.dtype.kind, f"record {got.dtype}, input {want.dtype}"
        # The generic test also hands this reference float64 copies of float32 inputs: the
        # values must match exactly, whatever the width they were stored with.
        assert np.array_equal(got.astype(np.float64), want.astype(np.float64)), (got, want)
    return None


def load_combine(file_path, load_as_fp16):
    arrays = read_combined(file_path)
    return [a.astype(np.float16) if load_as_fp16 and a.dtype.kind == "f" else a for a in arrays]
