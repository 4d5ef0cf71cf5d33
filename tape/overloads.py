"""Variable's Python operators and methods, each recorded as registered ops.

The other operand of an arithmetic operator or a comparison may be a Variable, a Python number,
or a numpy scalar or array, on either side; numbers and numpy values become constants of the
Variable's dtype, so ``x * 0.5`` stays float32 and ``np.ones(3) * x`` is recorded too.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import dtypes, ops
from .attr_signature import signature, token
from .errors import InvalidArgumentError
from .registry import op_info
from .tape import (
    LazyTape,
    Tape,
    _local,
    get_global_tape,
    lazy_positional_runner,
    positional_runner,
    runner,
)
from .variable import Variable, as_variable

# numpy defers to Variable's operators (``np.float32(2) * x``, ``np.ones(3) < x``) instead of
# turning the Variable into an array; the identity hash stays (Variables key dicts and sets)
Variable.__array_ufunc__ = None
Variable.__hash__ = object.__hash__
_FLOATING = dtypes.FLOATING


def _number(other):
    """``other`` as a Python float when it is a real number or a 0-D numpy value, else None."""
    if type(other) is float or type(other) is int:      # (the usual case, without an ABC check)
        return float(other)
    if isinstance(other, numbers.Real) or isinstance(other, np.ndarray) and other.ndim == 0:
        return float(other)
    return None


def _operand(x: Variable, other):
    """``other`` beside ``x`` as a Variable (a constant of x's dtype), or None if unsupported."""
    if isinstance(other, (Variable, numbers.Number, np.ndarray, np.generic)):
        return as_variable(other, like=x)
    return None


def _binary(op_type: str, by_number=None, reflected: bool = False, by_float=None):
    """An operator running ``op_type`` on (self, other), or on (other, self) when ``reflected``;
    ``by_number(self, c)`` serves a float Variable and a number ``c`` with one ``scale`` op.
    Each of these ops takes X and Y and writes Out; the operator gives them to the op's
    positional runner (``tape.positional``) on an eager tape.

    ``by_float(c)``, when given, is ``(scale, bias)`` of the scale op that serves a float
    Variable and a non-zero Python float ``c``, the commonest operand of all: served in the
    operator itself, its attributes remembered per ``c`` (a zero goes the general way,
    whose cache keeps its sign). The two common cases are written out as a function of no
    closure (``_written_out``); it hands every other to ``operator`` below."""
    info = op_info(op_type)

    def operator(self, other):
        if type(other) is Variable:
            y = other
        else:
            if by_number is not None and self.desc.dtype in _FLOATING:
                c = _number(other)
                if c is not None:
                    return by_number(self, c)
            y = _operand(self, other)
            if y is None:
                return NotImplemented
        t = _local.tape
        if type(t) is Tape or type(t) is LazyTape:  # (the positional runner: no dicts)
            run = info.positional or positional_runner(info) if type(t) is Tape else \
                info.lazy_positional or lazy_positional_runner(info)
            return run(t, _NO_ATTRS, (), y, self) if reflected else run(t, _NO_ATTRS, (), self, y)
        return _run(info, {"X": [y], "Y": [self]} if reflected else {"X": [self], "Y": [y]},
                    _NO_ATTRS, ())
    return _written_out(info, operator, reflected, by_float)


def _written_out(info, general, reflected: bool, by_float):
    """``general`` (an operator of ``_binary``) with its two common cases first, on an eager
    tape whose op has a positional runner: a Variable operand, and (with ``by_float``) a
    non-zero Python float one beside a float Variable."""
    lines = ["def operator(self, other):"]
    if by_float is not None:
        lines += ["    if type(other) is float and other and self.desc.dtype in FLOATING:",
                  "        made = floats.get(other)",
                  "        if made is None:",
                  "            made = remembered(floats, other, *by_float(other))",
                  "        t = local.tape",
                  "        if type(t) is Tape and (run := SCALE.positional) is not None:",
                  "            return run(t, made[0], made[1], self)",
                  "        if type(t) is LazyTape and (run := SCALE.lazy_positional) is not None:",
                  "            return run(t, made[0], made[1], self)",
                  "        return run_scale(self, made)"]
    lines += ["    if type(other) is Variable:",
              "        t = local.tape",
              "        if type(t) is Tape and (run := info.positional) is not None:",
              "            return run(t, NO_ATTRS, (), "
              + ("other, self)" if reflected else "self, other)"),
              "        if type(t) is LazyTape and (run := info.lazy_positional) is not None:",
              "            return run(t, NO_ATTRS, (), "
              + ("other, self)" if reflected else "self, other)"),
              "    return general(self, other)"]
    floats: dict = {}
    _float_caches.append(floats)
    namespace = dict(FLOATING=_FLOATING, floats=floats, remembered=_remembered,
                     by_float=by_float, local=_local, Tape=Tape, LazyTape=LazyTape,
                     SCALE=_SCALE,
                     run_scale=_run_scale, Variable=Variable, info=info, NO_ATTRS=_NO_ATTRS,
                     general=general)
    exec(compile("\n".join(lines), f"<operator of {info.type}>", "exec"), namespace)
    return namespace["operator"]


_NO_ATTRS: dict = {}    # (never written: runners only read the attributes they are given)


def _run(info, inputs: dict, attrs: dict, sig: tuple) -> Variable:
    """Out of op ``info`` run on the thread's tape: an eager tape's runner is called directly
    with ``sig``, the attributes' signature (``runner.signature``)."""
    t = _local.tape
    if t is None:
        t = get_global_tape()
    if type(t) is Tape:
        return (info.runner or runner(info))(t, inputs, attrs, None, sig)["Out"][0]
    if type(t) is LazyTape:
        return t.run(info, inputs, attrs, None, sig)["Out"][0]
    return t.run(info, inputs, attrs)["Out"][0]


_SCALE = op_info("scale")


def _scale(x: Variable, scale: float = 1.0, bias: float = -0.0) -> Variable:
    """``scale * x + bias`` as one ``scale`` op: ``x * 2.0`` and ``x + 1.0`` are the commonest
    ops of all. Its attributes and their signature are made once per (scale, bias), both
    always floats here, and neither a zero taken from the caller's operand: -0.0 == 0.0 would
    find the other zero's attributes (``_scale_signed`` takes those). A product's bias is
    -0.0, the one that adds nothing (``x * c`` stays IEEE's product, -0.0 included, where
    Paddle's scale would turn -0.0 + 0.0 into +0.0; the kernel then skips the add)."""
    made = _scale_attrs.get((scale, bias))
    if made is None:
        made = _remembered(_scale_attrs, (scale, bias), scale, bias)
    return _run_scale(x, made)


def _run_scale(x: Variable, made: tuple) -> Variable:
    """Out of ``scale`` on ``x`` with ``made``, its ``(attributes, signature)``."""
    t = _local.tape
    if type(t) is Tape:     # (the positional runner: no dicts in or out)
        return (_SCALE.positional or positional_runner(_SCALE))(t, made[0], made[1], x)
    if type(t) is LazyTape:
        return (_SCALE.lazy_positional or lazy_positional_runner(_SCALE))(t, made[0], made[1], x)
    return _run(_SCALE, {"X": [x]}, made[0], made[1])


# (scale, bias) -> (scale's attributes, their signature); and per operator served by a scale
# op, c -> the same for a float operand c (``_binary``'s ``by_float``)
_scale_attrs: dict = {}
_float_caches: list = []


def _remembered(cache: dict, key, scale: float, bias: float) -> tuple:
    """``(attributes, signature)`` of (scale, bias), remembered in ``cache`` under ``key``
    unless one is a NaN (a fresh NaN is a new key each time). The signature of remembered
    attributes is a token (``attr_signature.token``): one int, hashed at once where the
    tuple signature's floats would be hashed per op."""
    attrs = {"scale": scale, "bias": bias}
    if scale != scale or bias != bias:
        return attrs, signature(attrs)
    if len(cache) >= 1024:
        cache.clear()
    made = cache[key] = (attrs, token())
    return made


def _scale_signed(x: Variable, scale: float = 1.0, bias: float = -0.0) -> Variable:
    """``_scale`` for values that may be a zero of either sign (the operand of the general
    operators, a zero float): remembered under a key that holds the signs too."""
    key = (scale, bias, math.copysign(1.0, scale), math.copysign(1.0, bias))
    made = _scale_attrs.get(key)
    if made is None:
        made = _remembered(_scale_attrs, key, scale, bias)
    return _run_scale(x, made)


_add = _binary("elementwise_add", lambda x, c: _scale_signed(x, bias=c),
               by_float=lambda c: (1.0, c))
_sub = _binary("elementwise_sub", lambda x, c: _scale_signed(x, bias=-c),
               by_float=lambda c: (1.0, -c))
_rsub = _binary("elementwise_sub", lambda x, c: _scale_signed(x, scale=-1.0, bias=c),
                reflected=True, by_float=lambda c: (-1.0, c))
_mul = _binary("elementwise_mul", lambda x, c: _scale_signed(x, scale=c),
               by_float=lambda c: (c, -0.0))
_truediv = _binary("elementwise_div", lambda x, c: _scale_signed(x, scale=1.0 / c)
                   if c else ops.elementwise_div(x, _operand(x, c)))


def _truediv_float(self, other):
    if type(other) is float and other and self.desc.dtype in _FLOATING:
        scale = 1.0 / other
        if scale:   # (a zero when other is infinite: the general way keeps its sign)
            return _scale(self, scale)
    return _truediv(self, other)


Variable.__add__ = Variable.__radd__ = _add
Variable.__sub__ = _sub
Variable.__rsub__ = _rsub
Variable.__mul__ = Variable.__rmul__ = _mul
Variable.__truediv__ = _truediv_float
Variable.__rtruediv__ = _binary("elementwise_div", reflected=True)
Variable.__pow__ = _binary("elementwise_pow", lambda x, c: ops.pow(x, factor=c))
Variable.__rpow__ = _binary("elementwise_pow", reflected=True)
Variable.__matmul__ = _binary("matmul_v2")
Variable.__rmatmul__ = _binary("matmul_v2", reflected=True)
Variable.__lt__ = _binary("less_than")
Variable.__le__ = _binary("less_equal")
Variable.__gt__ = _binary("greater_than")
Variable.__ge__ = _binary("greater_equal")
Variable.__eq__ = _binary("equal")
Variable.__ne__ = _binary("not_equal")


def _neg(self):
    return _scale(self, scale=-1.0)


Variable.__neg__ = _neg
Variable.__abs__ = ops.abs


# --- methods: Paddle's names and defaults (axis, keepdim), as numpy and PyTorch spell them ---

def _axes(x: Variable, axis) -> list:
    """``axis`` (an int or a sequence of ints, negative from the end) as a list of axes."""
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    return [a + x.ndim if a < 0 else a for a in axes]


def _reduction(op_type: str, doc: str):
    op = getattr(ops, op_type)

    def reduce(self, axis=None, keepdim: bool = False) -> Variable:
        if axis is None:
            return op(self, dim=list(range(self.ndim)), keep_dim=keepdim, reduce_all=True)
        return op(self, dim=_axes(self, axis), keep_dim=keepdim)
    reduce.__name__ = reduce.__qualname__ = op_type.removeprefix("reduce_")
    reduce.__doc__ = (f"{doc} over ``axis`` (an int, a list of them, or None for every axis); "
                      f"``keepdim`` keeps the reduced axes with size 1.")
    return reduce


Variable.sum = _reduction("reduce_sum", "The sum")
Variable.mean = _reduction("reduce_mean", "The mean")
Variable.max = _reduction("reduce_max", "The largest element")
Variable.min = _reduction("reduce_min", "The smallest element")


def _slice(x: Variable, axis: int, start: int, stop: int) -> Variable:
    return ops.slice(x, axes=[axis], starts=[start], ends=[stop])


def _prod_along(x: Variable, axis: int) -> Variable:
    """The product over one axis, kept with size 1: halves multiplied pairwise, log2(n) levels
    (exact gradients, zeros included)."""
    n = x.shape[axis]
    if n < 0:
        raise InvalidArgumentError(f"prod: axis {axis} of {x.name} has an unknown size "
                                   f"(shape {list(x.shape)}); prod needs it known")
    while n > 1:
        half = n // 2
        paired = _slice(x, axis, 0, half) * _slice(x, axis, half, 2 * half)
        x = paired if n % 2 == 0 else ops.concat([paired, _slice(x, axis, n - 1, n)], axis=axis)
        n = half + n % 2
    return x


def prod(self, axis=None, keepdim: bool = False) -> Variable:
    """The product over ``axis`` (an int, a list of them, or None for every axis); ``keepdim``
    keeps the reduced axes with size 1."""
    axes = list(range(self.ndim)) if axis is None else _axes(self, axis)
    out = self
    for a in axes:
        out = _prod_along(out, a)
    return out if keepdim or not axes else ops.squeeze2(out, axes=axes)


def _arg(op_type: str, what: str):
    op = getattr(ops, op_type)

    def arg(self, axis=None, keepdim: bool = False) -> Variable:
        if axis is None:
            return op(self, axis=0, flatten=True)
        return op(self, axis=axis, keepdims=keepdim)
    arg.__name__ = arg.__qualname__ = op_type.replace("_", "")
    arg.__doc__ = (f"The int64 index of the {what} element along ``axis`` (of the flattened "
                   f"Variable when None).")
    return arg


Variable.argmax = _arg("arg_max", "largest")
Variable.argmin = _arg("arg_min", "smallest")


def _dims(dims) -> list:
    """``f(2, 3)`` or ``f((2, 3))`` -> [2, 3]."""
    return list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else list(dims)


def reshape(self, *shape) -> Variable:
    """The same elements in ``shape`` (``x.reshape(2, -1)`` or ``x.reshape((2, -1))``); -1
    infers one dim and 0 copies the input's, as in Paddle's reshape."""
    return ops.reshape2(self, shape=_dims(shape))


def transpose(self, *perm) -> Variable:
    """The axes permuted by ``perm`` (``x.transpose(1, 0)``); all reversed when none is given."""
    perm = _dims(perm) or list(range(self.ndim))[::-1]
    return ops.transpose2(self, axis=perm)


def flatten(self, start_axis: int = 0, stop_axis: int = -1) -> Variable:
    """Axes ``start_axis`` to ``stop_axis`` (inclusive) merged into one."""
    if self.ndim == 0:
        return ops.reshape2(self, shape=[1])
    start, stop = _axes(self, [start_axis, stop_axis])
    return ops.flatten_contiguous_range(self, start_axis=start, stop_axis=stop)


def squeeze(self, axis=None) -> Variable:
    """The size-1 axes removed: those in ``axis`` (an int or a list), or all when None."""
    return ops.squeeze2(self, axes=[] if axis is None else _axes(self, axis))


def unsqueeze(self, axis) -> Variable:
    """Size-1 axes inserted at ``axis`` (an int or a list), as positions in the result."""
    return ops.unsqueeze2(self, axes=axis)


def astype(self, dtype) -> Variable:
    """The values converted to ``dtype`` (a numpy dtype, or its name: ``"float64"``); gradients
    flow between floating dtypes."""
    code = dtypes.from_numpy(np.dtype(dtype))
    return self if code == self.desc.dtype else ops.cast(self, out_dtype=code)


def clip(self, min=None, max=None) -> Variable:  # noqa: A002 (Paddle's and PyTorch's names)
    """Each element limited to ``[min, max]`` (None: no limit on that side)."""
    return ops.clip(self, min=-np.inf if min is None else float(min),
                    max=np.inf if max is None else float(max))


def softmax(self, axis: int = -1) -> Variable:
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return ops.softmax(self, axis=axis)


def log_softmax(self, axis: int = -1) -> Variable:
    """``x - logsumexp(x)`` along ``axis``."""
    return ops.log_softmax(self, axis=axis)


for _method in (prod, reshape, transpose, flatten, squeeze, unsqueeze, astype, clip, softmax,
                log_softmax, ops.exp, ops.log, ops.sqrt, ops.tanh, ops.sigmoid, ops.relu, ops.abs):
    setattr(Variable, _method.__name__, _method)
del _method
Variable.T = property(transpose, doc="The axes reversed (``x.T`` of a matrix: its transpose).")
Variable.matmul = _binary("matmul_v2")


from . import variable_indexing  # noqa: E402,F401  (installs x[...] and iteration)
