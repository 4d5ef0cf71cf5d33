"""Variable: a VarDesc, its value (an array on a place) and its gradient."""
from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np

from . import dtypes
from .desc import VarDesc
from .errors import InvalidArgumentError, PreconditionNotMetError
from .names import name_source, unique_name  # noqa: F401  (imported from here too)
from .place import CPU, Place, default_place, host_array

_SUPPORTED = frozenset(dtypes.to_numpy(code) for code in dtypes.ALL)


def _as_array(value):
    if isinstance(value, np.ndarray) or type(value).__module__.startswith("cupy"):
        return value
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, np.generic):
        arr = arr.astype(np.float32)   # Python floats default to float32, as in Paddle and PyTorch
    return arr


class _ValueReads(threading.local):
    forbidden = 0    # > 0 while tape.static.trace runs the user's function on this thread


_value_reads = _ValueReads()
# how many times a Variable's stop_gradient was set to another value (one counter, in a list
# that generated code reads): what was checked of captured Variables holds while it stands
stop_gradient_flips = [0]


@contextlib.contextmanager
def forbid_value_reads():
    """While active (on this thread), reading a Variable's value raises: a traced program must
    not depend on the values seen while tracing."""
    _value_reads.forbidden += 1
    try:
        yield
    finally:
        _value_reads.forbidden -= 1


def reading_values_allowed() -> bool:
    """False while ``tape.static.trace`` runs the user's function on this thread."""
    return not _value_reads.forbidden


def _user_frame():
    """``file:line`` of the innermost caller outside the tape package (the user's code)."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "tape" and not module.startswith("tape."):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def _refuse_value_read(v, what: str):
    raise PreconditionNotMetError(
        f"{_user_frame()}: {what} reads the value of {v.name} while tracing a program; Python "
        f"control flow on it would bake the branch taken for the example inputs into the "
        f"program. Compute it with ops instead, or outside the traced function")


def new_variable(desc: VarDesc, value, tape: int, place: Place = CPU) -> Variable:
    """A Variable from a ready VarDesc and a value already on ``place`` (the eager hot path: no
    checks, no conversion)."""
    v = object.__new__(Variable)
    v.desc, v._value, v.grad, v._tape, v.place = desc, value, None, tape, place
    return v


class Variable:
    """A value that ops read and write, with an optional gradient.

    ``Variable(value, name=None, stop_gradient=True, place=None)``: a leaf holding ``value`` (a
    numpy or cupy array, or anything ``np.asarray`` takes; Python floats become float32), moved
    to ``place`` (default: ``tape.set_default_place``'s, else CPUPlace). Leaves with
    ``stop_gradient=False`` (parameters) receive ``.grad`` from ``backward``; outputs of ops
    recorded on the tape are non-leaves. ``place`` says where the value lives; an op runs on
    the place of its inputs and puts its outputs there.
    """

    # ``_lazy``: the ref of the lazy op a Variable without a value is pending on (tape.lazy);
    # only lazy runners set it, so an eager Variable never pays for it (read with getattr).
    __slots__ = ("desc", "_value", "grad", "_tape", "place", "_lazy", "__weakref__")

    def __init__(self, value=None, name: str | None = None, stop_gradient: bool = True,
                 place: Place | None = None):
        self.place = place = default_place() if place is None else place
        if value is None:
            self._value = None
            self.desc = VarDesc(name or unique_name(), (), dtypes.FP32, stop_gradient=stop_gradient)
        else:
            array = _as_array(value)
            if array.dtype not in _SUPPORTED:
                raise InvalidArgumentError(
                    f"Variable{f' {name}' if name else ''}: values of dtype {array.dtype} are not "
                    f"supported; expected one of {', '.join(sorted(map(str, _SUPPORTED)))}")
            self._value = place.put(array)
            self.desc = VarDesc(name or unique_name(), self._value.shape,
                                dtypes.from_numpy(self._value.dtype), stop_gradient=stop_gradient)
        self.grad: Variable | None = None
        self._tape = 0   # serial of the tape whose recorded op produced it; 0 for a leaf

    def value(self):
        """The array: numpy on CPUPlace, cupy on CUDAPlace (numpy under the CUDA simulator).
        A Variable pending on lazy ops (``tape.lazy``) runs what it needs first."""
        if _value_reads.forbidden:
            _refuse_value_read(self, f"{self.name}.value()")
        value = self._value
        return value if value is not None else self._computed()

    def _computed(self):
        """The value of a Variable that holds none: computed if it is pending on a lazy op
        (kept from then on), else None."""
        if getattr(self, "_lazy", None) is None:
            return None
        from .pending import settle
        return settle(self)

    @property
    def pending(self) -> bool:
        """Whether the value waits for lazy ops to run (``tape.lazy``)."""
        ref = getattr(self, "_lazy", None) if self._value is None else None
        return ref is not None and ref[0].results is None

    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def shape(self) -> tuple:
        return self.desc.shape

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.desc.shape)

    @property
    def size(self) -> int:
        """The number of elements (-1 while a dim is unknown)."""
        return -1 if -1 in self.desc.shape else int(np.prod(self.desc.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return dtypes.to_numpy(self.desc.dtype)

    @property
    def stop_gradient(self) -> bool:
        return self.desc.stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, flag: bool) -> None:
        flag = bool(flag)
        if flag is not self.desc.stop_gradient:
            self.desc.stop_gradient = flag
            stop_gradient_flips[0] += 1

    @property
    def is_leaf(self) -> bool:
        return self._tape == 0

    def detach(self) -> Variable:
        """A leaf constant sharing this value: use a Variable from an old tape as plain data."""
        return Variable(self._array(), place=self.place)

    def _array(self):
        """The value, computed first if pending (what every reader of the value uses)."""
        value = self._value
        return value if value is not None else self._computed()

    def to(self, place: Place) -> Variable:
        """Move the value (and gradient) to ``place``, in place; returns this Variable.

        >>> x = tape.Variable(np.ones(3, np.float32)).to(tape.CUDAPlace(0))
        """
        if place != self.place:
            if self._array() is not None:
                self._value = place.put(self._value)
            self.place = place
        if self.grad is not None:
            self.grad.to(place)
        return self

    def backward(self) -> None:
        """``get_global_tape().backward(self)``."""
        from .tape import get_global_tape
        get_global_tape().backward(self)

    def numpy(self) -> np.ndarray:
        """The value as a numpy array on the host: the array itself on CPUPlace (as PyTorch's
        ``numpy()``), a copy of a device value."""
        if _value_reads.forbidden:
            _refuse_value_read(self, f"{self.name}.numpy()")
        return host_array(self._array())

    def item(self):
        """The one element of the value as a Python number (``loss.item()``)."""
        if _value_reads.forbidden:
            _refuse_value_read(self, f"{self.name}.item()")
        value = self._array()
        if value.size != 1:     # checked on the device: only one element crosses
            raise InvalidArgumentError(f"{self.name}.item(): the value has {value.size} "
                                       f"elements {list(value.shape)}; item() needs exactly one")
        return host_array(value).item()

    def __array__(self, dtype=None, copy=None):
        if _value_reads.forbidden:
            _refuse_value_read(self, f"np.asarray({self.name})")
        value = host_array(self._array())
        return value if dtype is None else value.astype(dtype)

    def __bool__(self):
        if _value_reads.forbidden:
            _refuse_value_read(self, f"bool({self.name})")
        return bool(self._array())

    def __float__(self):
        if _value_reads.forbidden:
            _refuse_value_read(self, f"float({self.name})")
        return float(self._array())

    def __len__(self):
        return self.desc.shape[0]

    def __repr__(self):
        """The description and, as numpy, PyTorch and Paddle print them, the values (not while
        tracing, which reads none)."""
        place = "" if self.place is CPU else f", place={self.place}"
        head = (f"Variable({self.name}, shape={list(self.shape)}, dtype={self.dtype}, "
                f"stop_gradient={self.stop_gradient}{place}")
        if _value_reads.forbidden or self._array() is None:
            return head + ")"
        indent = " " * len("Variable(")
        values = np.array2string(host_array(self._value), prefix=indent, separator=", ")
        return f"{head},\n{indent}{values})"


def as_variable(x, dtype=None, like: Variable | None = None) -> Variable:
    """``x`` as a Variable: as is, or a constant of ``dtype`` (or ``like``'s dtype) on ``like``'s
    place."""
    if isinstance(x, Variable):
        return x
    dtype = like.dtype if dtype is None and like is not None else dtype
    return Variable(np.asarray(x, dtype=dtype), place=None if like is None else like.place)
