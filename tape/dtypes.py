"""Paddle's VarType.Type codes and their numpy dtypes."""
import numpy as np

BOOL, INT16, INT32, INT64, FP16, FP32, FP64 = 0, 1, 2, 3, 4, 5, 6
UINT8, INT8 = 20, 21

_TO_NUMPY = {
    BOOL: np.dtype(np.bool_), INT16: np.dtype(np.int16), INT32: np.dtype(np.int32),
    INT64: np.dtype(np.int64), FP16: np.dtype(np.float16), FP32: np.dtype(np.float32),
    FP64: np.dtype(np.float64), UINT8: np.dtype(np.uint8), INT8: np.dtype(np.int8),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}
FLOATING = frozenset((FP16, FP32, FP64))
ALL = (BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, FP32, FP64)
# What an index may be (gather's Index, one_hot_v2's X, arg_max / arg_min's output dtype)
INDEX = (INT32, INT64)
# What the indexing ops take as values: gather, arg_max / arg_min, top_k_v2 (gather's gradient:
# the floating ones)
INDEXED = (FP32, FP64, *INDEX)


def to_numpy(code: int) -> np.dtype:
    """The numpy dtype of a VarType code (``5 -> float32``)."""
    return _TO_NUMPY[code]


def from_numpy(dtype) -> int:
    """The VarType code of a numpy dtype (``float32 -> 5``)."""
    return _FROM_NUMPY[np.dtype(dtype)]


def is_valid(code) -> bool:
    return code in _TO_NUMPY


def name(code: int) -> str:
    """A readable name for error messages: ``float32``."""
    return _TO_NUMPY[code].name if code in _TO_NUMPY else f"VarType({code})"
