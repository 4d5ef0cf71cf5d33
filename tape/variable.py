"""Variable: a VarDesc, its value (an array on a place) and its gradient."""
from __future__ import annotations

import itertools

import numpy as np

from . import dtypes
from .desc import VarDesc

_name_sources: dict = {}


def name_source(prefix: str):
    """The iterator of process-unique names ``prefix_0, prefix_1, ...`` (one per prefix)."""
    source = _name_sources.get(prefix)
    if source is None:
        source = _name_sources[prefix] = map(f"{prefix}_{{}}".format, itertools.count())
    return source


def unique_name(prefix: str = "tmp") -> str:
    """A process-unique name: ``tmp_12``, ``linear_0``."""
    return next(name_source(prefix))


def _as_array(value):
    if isinstance(value, np.ndarray):
        return value
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, np.generic):
        arr = arr.astype(np.float32)   # Python floats default to float32, as in Paddle and PyTorch
    return arr


def new_variable(desc: VarDesc, value, tape: int) -> Variable:
    """A Variable from a ready VarDesc and value (the eager hot path: no checks, no conversion)."""
    v = object.__new__(Variable)
    v.desc, v._value, v.grad, v._tape = desc, value, None, tape
    return v


class Variable:
    """A value that ops read and write, with an optional gradient.

    ``Variable(value, name=None, stop_gradient=True)``: a leaf holding ``value`` (a numpy array,
    or anything ``np.asarray`` takes; Python floats become float32). Leaves with
    ``stop_gradient=False`` (parameters) receive ``.grad`` from ``backward``; outputs of ops
    recorded on the tape are non-leaves.
    """

    __slots__ = ("desc", "_value", "grad", "_tape", "__weakref__")

    def __init__(self, value=None, name: str | None = None, stop_gradient: bool = True):
        if value is None:
            self._value = None
            self.desc = VarDesc(name or unique_name(), (), dtypes.FP32, stop_gradient=stop_gradient)
        else:
            self._value = _as_array(value)
            self.desc = VarDesc(name or unique_name(), self._value.shape,
                                dtypes.from_numpy(self._value.dtype), stop_gradient=stop_gradient)
        self.grad: Variable | None = None
        self._tape = 0   # serial of the tape whose recorded op produced it; 0 for a leaf

    def value(self):
        """The array (numpy on CPUPlace)."""
        return self._value

    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def shape(self) -> tuple:
        return self.desc.shape

    @property
    def dtype(self) -> np.dtype:
        return dtypes.to_numpy(self.desc.dtype)

    @property
    def stop_gradient(self) -> bool:
        return self.desc.stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, flag: bool) -> None:
        self.desc.stop_gradient = bool(flag)

    @property
    def is_leaf(self) -> bool:
        return self._tape == 0

    def detach(self) -> Variable:
        """A leaf constant sharing this value: use a Variable from an old tape as plain data."""
        return Variable(self._value)

    def backward(self) -> None:
        """``get_global_tape().backward(self)``."""
        from .tape import get_global_tape
        get_global_tape().backward(self)

    def __array__(self, dtype=None, copy=None):
        return self._value if dtype is None else self._value.astype(dtype)

    def __len__(self):
        return self.desc.shape[0]

    def __repr__(self):
        return (f"Variable({self.name}, shape={list(self.shape)}, dtype={self.dtype}, "
                f"stop_gradient={self.stop_gradient})")
