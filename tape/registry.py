"""The op registry (Paddle's OpInfoMap): op type -> proto, shape rule, grad maker, kernels.

An op is declared once, in ``tape/ops/<family>.py``::

    register_op("relu", inputs=["X"], outputs=["Out"], infer_shape=same_as("X"),
                grad=GradOp(reads=["Out"]), case=unary_case())

and its kernels, plain functions over arrays, in ``kernels/cpu/<family>.py``::

    @kernel("relu")
    def relu(X):
        return np.maximum(X, 0)

A kernel's parameters name what it reads: an input slot (``X``), the gradient of one (``dOut`` for
``Out@GRAD``), an attribute (``axis``), ``wants`` (the output slots the caller asked for) or
``ctx`` (an ExecutionContext, for kernels that read inputs only on some paths). It returns its
outputs in output-slot order.
"""
from __future__ import annotations

import inspect
import numbers

from . import dtypes
from .desc import OpDesc, VarDesc
from .errors import InvalidArgumentError, NotFoundError
from .place import CPU

# framework.proto AttrType
INT, FLOAT, STRING, INTS, FLOATS, STRINGS, BOOLEAN, BOOLEANS, BLOCK, LONG, BLOCKS, LONGS = range(12)
ATTR_TYPE_NAMES = ("INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "BOOLEAN", "BOOLEANS",
                   "BLOCK", "LONG", "BLOCKS", "LONGS")
GRAD_SUFFIX = "@GRAD"


def grad_name(name: str) -> str:
    """``x`` -> ``x@GRAD``."""
    return name + GRAD_SUFFIX


class Slot:
    """An input or output slot of an op proto."""

    __slots__ = ("name", "doc", "duplicable", "dispensable", "no_need_buffer", "intermediate")

    def __init__(self, name: str, doc: str = "", *, duplicable=False, dispensable=False,
                 no_need_buffer=False, intermediate=False):
        self.name = name
        self.doc = doc
        self.duplicable = duplicable
        self.dispensable = dispensable
        self.no_need_buffer = no_need_buffer
        self.intermediate = intermediate

    def __repr__(self):
        flags = [f for f in self.__slots__[2:] if getattr(self, f)]
        return f"Slot({self.name}{', ' if flags else ''}{', '.join(flags)})"


# ---- attribute value checks: each can say what it wants and give values it rejects ----

class AtLeast:
    def __init__(self, low):
        self.low = low

    def __call__(self, v):
        return v >= self.low

    def describe(self):
        return f">= {self.low}"

    def invalid(self):
        return [self.low - 1]


class InRange:
    """Closed interval ``[low, high]``."""

    def __init__(self, low, high):
        self.low, self.high = low, high

    def __call__(self, v):
        return self.low <= v <= self.high

    def describe(self):
        return f"in [{self.low}, {self.high}]"

    def invalid(self):
        return [self.low - 1, self.high + 1]


class OneOf:
    def __init__(self, *values):
        self.values = values

    def __call__(self, v):
        return v in self.values

    def describe(self):
        return f"one of {list(self.values)}"

    def invalid(self):
        if all(isinstance(v, str) for v in self.values):
            return ["__not_an_option__"]
        return [max(self.values) + 1]


class Each:
    """Applies a check to every element of a list attribute."""

    def __init__(self, check):
        self.check = check

    def __call__(self, v):
        return all(self.check(x) for x in v)

    def describe(self):
        return f"every element {self.check.describe()}"

    def invalid(self):
        return [(x,) for x in self.check.invalid()]


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_float(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_bool(v):
    return isinstance(v, bool) or type(v).__name__ == "bool_"


_SCALAR_TYPES = {
    INT: (_is_int, int), LONG: (_is_int, int), FLOAT: (_is_float, float),
    STRING: (lambda v: isinstance(v, str), str), BOOLEAN: (_is_bool, bool),
    BLOCK: (_is_int, int),
}
_LIST_TYPES = {INTS: INT, LONGS: LONG, FLOATS: FLOAT, STRINGS: STRING, BOOLEANS: BOOLEAN,
               BLOCKS: BLOCK}


class Attr:
    """A typed attribute with a default (``None``: required) and an optional value check."""

    __slots__ = ("name", "type", "default", "doc", "check")

    def __init__(self, name: str, type: int, default=None, doc: str = "", check=None):
        self.name = name
        self.type = type
        self.doc = doc
        self.check = check
        self.default = None if default is None else self.coerce("<proto>", default)

    def coerce(self, op_type: str, value):
        """Type-check and normalise a value (lists become tuples); raise naming op and attribute."""
        if self.type in _SCALAR_TYPES:
            ok, cast = _SCALAR_TYPES[self.type]
            good = ok(value)
            value = cast(value) if good else value
        else:
            ok, cast = _SCALAR_TYPES[_LIST_TYPES[self.type]]
            good = isinstance(value, (list, tuple)) and all(ok(x) for x in value)
            value = tuple(cast(x) for x in value) if good else value
        if not good:
            raise InvalidArgumentError(
                f"{op_type}: attribute '{self.name}' expects {ATTR_TYPE_NAMES[self.type]}, "
                f"received {value!r} ({type(value).__name__})")
        if self.check is not None and not self.check(value):
            raise InvalidArgumentError(
                f"{op_type}: attribute '{self.name}' must be {self.check.describe()}, "
                f"received {value!r}")
        return value


# ---- grad makers ----

class GradMaker:
    """Turns a forward OpDesc into grad OpDescs.

    ``reads`` names the forward slots (inputs or outputs) the grad ops take; of those,
    ``no_need_buffer`` ones are read only for their shape and dtype. ``keeps`` (reads minus
    no-need-buffer) is exactly what the eager tape keeps alive for backward. ``grads`` names the
    input slots that receive gradients. Subclasses implement ``make``.
    """

    reads: frozenset = frozenset()
    no_need_buffer: frozenset = frozenset()
    keeps: frozenset = frozenset()
    grads: tuple = ()
    # Whether ``make`` looks at attribute values: the eager plan cache then keys on them too.
    depends_on_attrs = False

    def make(self, op: OpDesc) -> list[OpDesc]:
        raise NotImplementedError


class GradOp(GradMaker):
    """The common gradient: one ``<type>_grad`` op reading ``reads`` plus output gradients.

    ``grads`` are the input slots that receive gradients (default: every input slot but those
    in ``no_grad``); ``out_grads`` the output slots whose gradients it reads (default: the
    non-intermediate outputs).
    """

    def __init__(self, reads=(), grads=None, out_grads=None, no_grad=(), no_need_buffer=()):
        self.reads = frozenset(reads)
        self.no_need_buffer = frozenset(no_need_buffer)
        self.keeps = self.reads - self.no_need_buffer
        self._read_order = tuple(reads)
        self.grads = grads
        self._out_grads = out_grads
        self._no_grad = frozenset(no_grad)

    def bind(self, info: OpInfo) -> None:
        """Fill defaults from the forward proto and register the grad op's proto."""
        names = {s.name for s in info.inputs} | {s.name for s in info.outputs}
        unknown = self.reads - names
        if unknown:
            raise NotFoundError(f"{info.type}: grad reads unknown slot(s) {sorted(unknown)}")
        if self.grads is None:
            self.grads = tuple(s.name for s in info.inputs if s.name not in self._no_grad)
        if self._out_grads is None:
            self._out_grads = tuple(s.name for s in info.outputs if not s.intermediate)
        self.type = info.type + "_grad"
        by_name = {s.name: s for s in info.inputs + info.outputs}
        ins = [Slot(n, by_name[n].doc, duplicable=by_name[n].duplicable,
                    dispensable=by_name[n].dispensable, no_need_buffer=n in self.no_need_buffer)
               for n in self._read_order]
        ins += [Slot(grad_name(n), f"gradient of {n}") for n in self._out_grads]
        outs = [Slot(grad_name(n), f"gradient of {n}", duplicable=by_name[n].duplicable,
                     dispensable=True) for n in self.grads]
        register_op(self.type, inputs=ins, outputs=outs, attrs=list(info.attrs.values()),
                    doc=f"Gradient of {info.type}.")

    def make(self, op: OpDesc) -> list[OpDesc]:
        ins = {}
        for slot in self._read_order:
            ins[slot] = op.inputs[slot] if slot in op.inputs else op.outputs.get(slot, [])
        for slot in self._out_grads:
            ins[grad_name(slot)] = [grad_name(n) for n in op.outputs.get(slot, [])]
        outs = {grad_name(s): [grad_name(n) for n in op.inputs.get(s, [])] for s in self.grads}
        return [OpDesc(self.type, ins, outs, op.attrs)]


# ---- shape inference and execution contexts ----

class InferShapeContext:
    """What a shape rule sees: the op's attributes and the VarDescs of its inputs.

    Bound to a temporary block (the eager tape) or to a real BlockDesc (static mode); a rule
    reads input VarDescs, validates them and sets ``(shape, dtype)`` for each output.
    """

    __slots__ = ("op_type", "ins", "attrs", "outs")

    def __init__(self, op_type: str, ins: dict, attrs: dict):
        self.op_type = op_type
        self.ins = ins            # {slot: [VarDesc]}
        self.attrs = attrs
        self.outs = {}            # {slot: [(shape, dtype)]}

    def input(self, slot: str) -> VarDesc:
        return self.ins[slot][0]

    def inputs(self, slot: str) -> list:
        return self.ins.get(slot, [])

    def has_input(self, slot: str) -> bool:
        return bool(self.ins.get(slot))

    def set_output(self, slot: str, shape, dtype: int) -> None:
        self.outs[slot] = [(tuple(shape), dtype)]

    def set_outputs(self, slot: str, specs) -> None:
        self.outs[slot] = [(tuple(s), d) for s, d in specs]

    def error(self, message: str) -> InvalidArgumentError:
        """An error to raise, prefixed with the op type: ``raise ctx.error("X ...")``."""
        return InvalidArgumentError(f"{self.op_type}: {message}")


class ExecutionContext:
    """Handed to kernels that take a ``ctx`` parameter: inputs by slot, attributes, wanted outputs."""

    __slots__ = ("op_type", "_ins", "attrs", "_wants", "read")

    def __init__(self, op_type: str, ins: dict, attrs: dict, wants):
        self.op_type = op_type
        self._ins = ins
        self.attrs = attrs
        self._wants = wants
        self.read = set()

    def input(self, slot: str):
        self.read.add(slot)
        return self._ins.get(slot)

    def attr(self, name: str):
        return self.attrs[name]

    def wants(self, slot: str) -> bool:
        return self._wants is None or slot in self._wants


class Kernel:
    """A kernel function and how its parameters bind to inputs and attributes."""

    __slots__ = ("fn", "params", "call")

    def __init__(self, fn):
        self.fn = fn
        self.params = tuple(inspect.signature(fn).parameters)
        self.call = None

    def bind(self, info: OpInfo) -> None:
        slots = {s.name for s in info.inputs}
        args = []
        for p in self.params:
            if p in slots:
                args.append(f"ins.get({p!r})")
            elif p[:1] == "d" and grad_name(p[1:]) in slots:
                args.append(f"ins.get({grad_name(p[1:])!r})")
            elif p in info.attrs:
                args.append(f"attrs[{p!r}]")
            elif p == "wants":
                args.append("wants")
            elif p == "ctx":
                args.append("ExecutionContext(op_type, ins, attrs, wants)")
            else:
                raise NotFoundError(
                    f"{info.type}: kernel {self.fn.__name__} has parameter '{p}', which names "
                    f"no input slot, gradient slot (d<Slot>) or attribute of the op")
        # A generated lambda binds arguments without a per-call loop over the parameters:
        # this runs for every op of every iteration.
        src = f"lambda ins, attrs, wants: fn({', '.join(args)})"
        self.call = eval(src, {"fn": self.fn, "ExecutionContext": ExecutionContext,
                               "op_type": info.type})


class OpInfo:
    """Everything registered about one op type."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "defaults", "infer_shape", "grad",
                 "kernels", "case", "doc", "input_names", "output_names", "visible_outputs",
                 "kernel_dtype_attr", "fixed_arity", "duplicable_free", "slot_specs", "shape_cache",
                 "attr_cache")

    def __init__(self, type, inputs, outputs, attrs, infer_shape, grad, case, doc):
        self.type = type
        self.inputs = tuple(Slot(s) if isinstance(s, str) else s for s in inputs)
        self.outputs = tuple(Slot(s) if isinstance(s, str) else s for s in outputs)
        self.attrs = {a.name: a for a in attrs}
        self.defaults = {a.name: a.default for a in attrs if a.default is not None}
        self.infer_shape = infer_shape
        self.grad = grad
        self.kernels = {}
        self.case = case
        self.doc = doc
        self.input_names = tuple(s.name for s in self.inputs)
        self.output_names = tuple(s.name for s in self.outputs)
        self.visible_outputs = tuple(s.name for s in self.outputs if not s.intermediate)
        self.kernel_dtype_attr = "dtype" if "dtype" in self.attrs else None
        self.shape_cache = {}
        self.attr_cache = {}
        self.slot_specs = tuple((s.name, s.duplicable, s.dispensable) for s in self.inputs)
        self.duplicable_free = not any(s.duplicable for s in self.inputs + self.outputs)
        self.fixed_arity = self.duplicable_free and not any(
            s.dispensable for s in self.inputs + self.outputs)

    def check_attrs(self, attrs) -> dict:
        """Validate given attributes against the proto and fill defaults."""
        if not attrs:
            if len(self.defaults) != len(self.attrs):
                self._missing_attrs(())
            return self.defaults
        full = dict(self.defaults)
        for name, value in attrs.items():
            spec = self.attrs.get(name)
            if spec is None:
                raise InvalidArgumentError(
                    f"{self.type}: unknown attribute '{name}'; the op takes "
                    f"{sorted(self.attrs) or 'no attributes'}")
            full[name] = spec.coerce(self.type, value)
        if len(full) != len(self.attrs):
            self._missing_attrs(full)
        return full

    def checked_attrs(self, attrs):
        """``(check_attrs(attrs), a hashable key of the result)``, remembered per distinct call.

        The cache key carries each value's type, so ``1`` and ``1.0`` and ``True`` are told
        apart and a value of the wrong type is rejected every time, not only the first.
        """
        if not attrs:
            return self.check_attrs(attrs), ()
        try:
            key = (*attrs.items(), *map(type, attrs.values()))
            hit = self.attr_cache.get(key)
        except TypeError:   # a list value: unhashable until normalised
            full = self.check_attrs(attrs)
            return full, tuple(full.items())
        if hit is None:
            full = self.check_attrs(attrs)
            if len(self.attr_cache) >= 1024:
                self.attr_cache.clear()
            hit = self.attr_cache[key] = (full, tuple(full.items()))
        return hit

    def _missing_attrs(self, given):
        missing = sorted(set(self.attrs) - set(given))
        raise InvalidArgumentError(f"{self.type}: attribute(s) {missing} have no default and "
                                   f"must be given")

    def kernel(self, place, dtype: int) -> Kernel:
        k = self.kernels.get((place.key, dtype))
        if k is None:
            have = sorted(dtypes.name(d) for p, d in self.kernels if p == place.key)
            raise NotFoundError(f"{self.type}: no kernel for ({place}, {dtypes.name(dtype)}); "
                                f"registered: {have or 'none'}")
        if k.call is None:
            k.bind(self)
        return k

    def __repr__(self):
        return f"OpInfo({self.type})"


REGISTRY: dict[str, OpInfo] = {}


def register_op(type: str, inputs=(), outputs=(), attrs=(), infer_shape=None, grad=None,
                case=None, doc: str = "") -> OpInfo:
    """Declare an op: slots, attributes, shape rule, grad maker and test case (see module doc)."""
    if type in REGISTRY:
        raise InvalidArgumentError(f"op '{type}' is already registered")
    info = OpInfo(type, inputs, outputs, attrs, infer_shape, grad, case, doc)
    REGISTRY[type] = info
    if isinstance(grad, GradOp):
        grad.bind(info)
    return info


def op_info(type: str) -> OpInfo:
    info = REGISTRY.get(type)
    if info is None:
        raise NotFoundError(f"no op named '{type}' is registered")
    return info


FLOAT_TYPES = (dtypes.FP32, dtypes.FP64)


def kernel(op_type: str, types=FLOAT_TYPES, place=CPU):
    """Register the decorated function as the kernel of ``op_type`` for each dtype in ``types``."""
    def register(fn):
        info = op_info(op_type)
        k = Kernel(fn)
        for d in types:
            info.kernels[(place.key, d)] = k
        return fn
    return register
