"""The op registry (Paddle's OpInfoMap): op type -> proto, shape rule, grad maker, kernels.

An op is declared once, in ``tape/ops/<family>.py``::

    register_op("relu", inputs=["X"], outputs=["Out"], infer_shape=same_as("X"),
                grad=GradOp(reads=["Out"]), case=unary_case())

and its kernels, plain functions over arrays, in ``kernels/cpu/<family>.py``::

    @kernel("relu")
    def relu(X):
        return np.maximum(X, 0)

A kernel's parameters name what it reads: an input slot (``X``), the gradient of one (``dOut`` for
``Out@GRAD``), an attribute (``axis``) or ``wants`` (the output slots the caller asked for). It
returns its outputs in output-slot order.
"""
from __future__ import annotations

import weakref

from . import dtypes
from .attr_signature import signature
from .desc import GRAD_SUFFIX, OpDesc, grad_name  # noqa: F401  (imported from here too)
from .errors import InvalidArgumentError, NotFoundError
from .kernel_binding import Kernel
from .place import CPU


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


# ---- grad makers ----

class GradMaker:
    """Turns a forward OpDesc into grad OpDescs.

    ``reads`` names the forward slots (inputs or outputs) the grad ops take; of those,
    ``no_need_buffer`` ones are read only for their shape and dtype. ``keeps`` (reads minus
    no-need-buffer) is exactly what the eager tape keeps alive for backward. ``grads`` names the
    input slots that receive gradients; ``out_grads`` the output slots whose gradients the grad
    ops read (None: every output) — only those outputs want a gradient, so an op's in-place
    bookkeeping outputs (batch norm's running statistics) stay constants. Subclasses implement
    ``make``.
    """

    out_grads: frozenset | None = None
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
    non-intermediate outputs), zeros standing in for a gradient that never arrived;
    ``optional_out_grads`` those it reads only when one arrived (dispensable slots).
    """

    def __init__(self, reads=(), grads=None, out_grads=None, no_grad=(), no_need_buffer=(),
                 optional_out_grads=()):
        self.reads = frozenset(reads)
        self.no_need_buffer = frozenset(no_need_buffer)
        self.keeps = self.reads - self.no_need_buffer
        self._read_order = tuple(reads)
        self.grads = grads
        self._out_grads = None if out_grads is None else tuple(out_grads)
        self._optional_out_grads = tuple(optional_out_grads)
        self._no_grad = frozenset(no_grad)

    def bind(self, info: OpInfo, transient: bool = False) -> None:
        """Fill defaults from the forward proto and register the grad op's proto (``transient``
        as the forward op; this GradOp, which the forward op holds, then holds the grad op's
        OpInfo, so the two live as long as each other)."""
        names = {s.name for s in info.inputs} | {s.name for s in info.outputs}
        unknown = self.reads - names
        if unknown:
            raise NotFoundError(f"{info.type}: grad reads unknown slot(s) {sorted(unknown)}")
        if self.grads is None:
            self.grads = tuple(s.name for s in info.inputs if s.name not in self._no_grad)
        if self._out_grads is None:
            self._out_grads = tuple(s.name for s in info.outputs if not s.intermediate)
        self.out_grads = frozenset(self._out_grads + self._optional_out_grads)
        self.type = info.type + "_grad"
        by_name = {s.name: s for s in info.inputs + info.outputs}
        ins = [Slot(n, by_name[n].doc, duplicable=by_name[n].duplicable,
                    dispensable=by_name[n].dispensable, no_need_buffer=n in self.no_need_buffer)
               for n in self._read_order]
        ins += [Slot(grad_name(n), f"gradient of {n}", duplicable=by_name[n].duplicable)
                for n in self._out_grads]
        ins += [Slot(grad_name(n), f"gradient of {n}, when one arrived", dispensable=True,
                     duplicable=by_name[n].duplicable) for n in self._optional_out_grads]
        outs = [Slot(grad_name(n), f"gradient of {n}", duplicable=by_name[n].duplicable,
                     dispensable=True) for n in self.grads]
        self.info = register_op(self.type, inputs=ins, outputs=outs,
                                attrs=list(info.attrs.values()), doc=f"Gradient of {info.type}.",
                                transient=transient)

    def make(self, op: OpDesc) -> list[OpDesc]:
        ins = {}
        for slot in self._read_order:
            ins[slot] = op.inputs[slot] if slot in op.inputs else op.outputs.get(slot, [])
        for slot in self._out_grads + self._optional_out_grads:
            ins[grad_name(slot)] = [grad_name(n) for n in op.outputs.get(slot, [])]
        outs = {grad_name(s): [grad_name(n) for n in op.inputs.get(s, [])] for s in self.grads}
        return [OpDesc(self.type, ins, outs, op.attrs)]


class OpInfo:
    """Everything registered about one op type."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "defaults", "infer_shape", "grad",
                 "kernels", "case", "doc", "input_names", "output_names", "visible_outputs",
                 "kernel_dtype_attr", "slot_specs", "plans", "attr_cache",
                 "differentiable_outputs", "keeps", "slot_names", "runner", "positional",
                 "lazy_positional", "lazy_runner", "__weakref__")

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
        self.plans = {}      # signature -> CallPlan (tape.dispatch)
        self.attr_cache = {}
        self.differentiable_outputs = frozenset()
        self.keeps = frozenset()     # the slots whose values backward reads (grad.keeps)
        self.slot_names = frozenset(self.input_names + self.output_names)
        self.runner = None           # its eager runner (tape.runner), made on first use
        self.positional = None       # its positional runner (tape.positional), likewise
        self.lazy_positional = None  # and its lazy one
        self.lazy_runner = None      # its general lazy runner (tape.runner), made on first use
        self.slot_specs = tuple((s.name, s.duplicable, s.dispensable) for s in self.inputs)

    def check_attrs(self, attrs) -> dict:
        """Validate given attributes against the proto and fill defaults."""
        if not attrs:
            if len(self.defaults) != len(self.attrs):
                self._missing_attrs(self.defaults)
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

        The cache key, and the key returned, are the attributes' signature (``attr_signature``):
        ``1``, ``1.0`` and ``True`` are told apart, and so are ``0.0`` and ``-0.0``, so that a
        value of the wrong type is rejected every time, not only the first, and a zero keeps
        its sign.
        """
        if not attrs:
            return self.check_attrs(attrs), ()
        key = signature(attrs)
        try:
            hit = self.attr_cache.get(key)
        except TypeError:   # a list value: unhashable until normalised
            full = self.check_attrs(attrs)
            return full, signature(full)
        if hit is None:
            full = self.check_attrs(attrs)
            if len(self.attr_cache) >= 1024:
                self.attr_cache.clear()
            hit = self.attr_cache[key] = (full, signature(full))
        return hit

    def _missing_attrs(self, given):
        missing = sorted(set(self.attrs) - set(given))
        raise InvalidArgumentError(f"{self.type}: attribute(s) {missing} have no default and "
                                   f"must be given")

    def kernel(self, place, dtype: int) -> Kernel:
        """The kernel for ``place``'s kind and ``dtype`` (the CUDA ones load on first request)."""
        k = self.kernels.get((place.key, dtype))
        if k is None and load_kernels(place):
            k = self.kernels.get((place.key, dtype))
        if k is None:
            have = sorted(dtypes.name(d) for p, d in self.kernels if p == place.key)
            raise NotFoundError(f"{self.type}: no kernel for ({place}, {dtypes.name(dtype)}); "
                                f"registered: {have or 'none'}")
        return k

    def __repr__(self):
        return f"OpInfo({self.type})"


REGISTRY: dict[str, OpInfo] = {}
# Ops registered for as long as something uses them (a traced function's, ``tape.function``):
# held by what uses them (the trace, the CallPlans of recorded ops), not here, so that a
# function's op and everything it keeps go when the function and its recorded ops are gone
_TRANSIENT: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class _NoPlanCache(dict):
    """The plan cache of an op whose output shapes depend on more than its inputs: never
    remembers, so its shape rule runs on every call."""

    def get(self, key, default=None):
        return default

    def __setitem__(self, key, value):
        pass


def register_op(type: str, inputs=(), outputs=(), attrs=(), infer_shape=None, grad=None,
                case=None, doc: str = "", cache_shapes: bool = True,
                transient: bool = False) -> OpInfo:
    """Declare an op: slots, attributes, shape rule, grad maker and test case (see module doc).

    ``cache_shapes=False`` for an op whose output shapes are not a function of its input
    shapes and attributes (``load_combine`` reads them from a file): its shape rule then runs
    on every call instead of being remembered. A ``transient`` op (a traced function's) is
    registered only while the returned OpInfo is referenced elsewhere.
    """
    if type in REGISTRY or type in _TRANSIENT:
        raise InvalidArgumentError(f"op '{type}' is already registered")
    info = OpInfo(type, inputs, outputs, attrs, infer_shape, grad, case, doc)
    if not cache_shapes:
        info.plans = _NoPlanCache()
    (_TRANSIENT if transient else REGISTRY)[type] = info
    if isinstance(grad, GradOp):
        grad.bind(info, transient)
    if grad is not None:
        info.differentiable_outputs = (frozenset(info.output_names) if grad.out_grads is None
                                       else grad.out_grads)
        info.keeps = grad.keeps
    return info


def op_info(type: str) -> OpInfo:
    info = REGISTRY.get(type) or _TRANSIENT.get(type)
    if info is None:
        raise NotFoundError(f"no op named '{type}' is registered")
    return info


FLOAT_TYPES = (dtypes.FP32, dtypes.FP64)
_loaded_kinds = {CPU.key}    # the CPU kernels register when tape is imported


def load_kernels(place) -> bool:
    """Register the kernels of ``place``'s kind if not done yet; whether it did.

    The CUDA kernels (``tape.kernels.cuda.KERNELS``, which take the CPU kernels' parameters)
    register for the dtypes of each op's CPU kernel, on the first request for one: importing
    them imports numba.cuda, which ``import tape`` must not.
    """
    if place.key in _loaded_kinds:
        return False
    from .place import cuda_backend
    for op_type, fn in cuda_backend().KERNELS.items():
        info = REGISTRY.get(op_type)
        if info is None:
            continue
        k = Kernel(fn, info)
        for p, d in list(info.kernels):
            if p == CPU.key:
                info.kernels[(place.key, d)] = k
    _loaded_kinds.add(place.key)
    return True


def kernel(op_type: str, types=FLOAT_TYPES, place=CPU):
    """Register the decorated function as the kernel of ``op_type`` for each dtype in ``types``."""
    def register(fn):
        info = op_info(op_type)
        k = Kernel(fn, info)
        for d in types:
            info.kernels[(place.key, d)] = k
        return fn
    return register
