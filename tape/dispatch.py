"""The dispatch core: ``infer`` an op's call plan once per signature, ``invoke`` it per call.

Every path that runs an op goes through these two: the eager tape (forward and backward), the
static Executor and the gradient checker. ``infer`` does what an op's signature fixes (the op,
its attributes, its inputs' slots, shapes, dtypes and place, and which inputs want gradients):
it asks the shape rule, picks the kernel's dtype and the kernel, and says what a recorded handle
keeps and which outputs carry gradients. The answer, a CallPlan, is cached by the caller under
the signature. ``invoke`` runs a plan's kernel on arrays, with the NaN/Inf and unused-input
checks when they are on, and returns one entry per output slot. The two are separate so that an
op can be inferred when it is recorded and invoked later.
"""
from __future__ import annotations

from . import dtypes
from . import flags as _flags
from .checks import run_kernel
from .context import InferShapeContext
from .registry import OpInfo

_PLAN_CACHE_LIMIT = 4096


class CallPlan:
    """What one signature of an op fixes.

    ``specs`` is ``{output slot: [(shape, dtype)]}`` from the shape rule; ``outputs`` lists, in
    the kernel's output order, ``(slot, duplicable, specs or None, carries_gradient)``;
    ``wants_grad`` is ``{input slot: (bool per variable)}`` and ``requires_grad`` whether the op
    passes a gradient to any of them; ``call`` is the kernel's bound call and ``direct`` the same
    taking one array per input slot (``Kernel.positional``); ``made`` is what an eager output
    Variable is made from, ``(shape, dtype, stop_gradient when a gradient flows)`` per output
    slot (a tuple of them for a duplicable slot, None for a slot the op does not write), or
    None when the outputs need the generic path (shapes that only the values tell), and
    ``made_whole`` the same, None also when a slot the op always writes is undescribed;
    ``backward`` is filled in by the first backward through the plan (its grad steps, ready to
    run), and ``replay`` with them written out as one function (``tape.grad_replay``). A grad op
    run for a forward plan (eager backward) has no specs: its output shapes follow from the
    forward values.
    """

    __slots__ = ("info", "attrs", "attrs_key", "place", "dtype", "kernel", "call", "direct",
                 "specs", "made", "made_whole", "outputs", "wants_grad", "requires_grad",
                 "backward", "replay", "shaped_by_values", "layout")

    def __init__(self, info: OpInfo, attrs: dict, attrs_key, place, dtype: int,
                 specs: dict | None = None, wants_grad: dict | None = None):
        self.info = info
        self.attrs = attrs
        self.attrs_key = attrs_key
        self.place = place
        self.dtype = dtype
        self.kernel = info.kernel(place, dtype)
        self.call = self.kernel.call
        self.direct = _positional(self.kernel, info, attrs, dtype)
        self.specs = specs = specs or {}
        differentiable = info.differentiable_outputs
        self.outputs = tuple(
            (s.name, s.duplicable, specs.get(s.name),
             s.name in differentiable and bool(specs.get(s.name))
             and specs[s.name][0][1] in dtypes.FLOATING)
            for s in info.outputs)
        # an unknown (-1) output dim that only the kernel's values tell (fill_constant with
        # ShapeTensorList, range): an eager output then takes its value's shape
        self.shaped_by_values = any(n < 0 for ss in specs.values() for s, _ in ss for n in s)
        self.made = None if self.shaped_by_values or any(
            not dup and ss is not None and len(ss) != 1 for _, dup, ss, _ in self.outputs) \
            else tuple(None if ss is None else tuple((s, d, not carries) for s, d in ss)
                       if dup else (ss[0][0], ss[0][1], not carries)
                       for _, dup, ss, carries in self.outputs)
        # ``made`` when it describes every output the op always writes (a positional runner's
        # test: ``tape.positional``), else None
        self.made_whole = None if self.made is None or any(
            m is None for m, s in zip(self.made, info.outputs)
            if not (s.duplicable or s.dispensable)) else self.made
        self.wants_grad = wants_grad
        self.requires_grad = info.grad is not None and any(
            any(wants) for wants in (wants_grad or {}).values())
        self.backward = None
        self.replay = None
        self.layout = None      # how an EagerHandle lays out its entries (handles.entry_layout)

    def value_shaped(self, result) -> tuple:
        """``outputs`` with each spec's shape taken from the kernel's ``result`` (one entry per
        output slot): for a plan whose output shapes are ``shaped_by_values``."""
        outputs = []
        for (slot, duplicable, specs, carries), value in zip(self.outputs, result):
            values = value if duplicable else (value,)
            # (a lazy run's stand-ins are None: its outputs keep the unknown dims until it runs)
            if specs is not None and value is not None and \
                    all(v is not None for v in values):
                specs = [(tuple(v.shape), dtype) for (_, dtype), v in zip(specs, values)]
            outputs.append((slot, duplicable, specs, carries))
        return tuple(outputs)

    def __repr__(self):
        return f"CallPlan({self.info.type}, {self.place}, {dtypes.name(self.dtype)})"


def infer(info: OpInfo, attrs: dict, attrs_key, descs: dict, place, cache_key=None,
          declared: dict | None = None) -> CallPlan:
    """The CallPlan of ``info`` on inputs described by ``descs`` (``{slot: [VarDesc]}``) with
    checked attributes ``attrs`` (``info.checked_attrs`` gives them and ``attrs_key``), run on
    ``place``; remembered in ``info.plans`` under ``cache_key`` when given.

    ``declared`` (static mode) holds the VarDescs of the outputs a program declares, for rules
    that cannot know an output's shape from the inputs. Raises the shape rule's error, naming
    the op and the slot, before any kernel runs.
    """
    specs = infer_shapes(info, descs, attrs, declared)
    wants_grad = {slot: tuple(not d.stop_gradient for d in ds) for slot, ds in descs.items()}
    plan = CallPlan(info, attrs, attrs_key, place, kernel_dtype(info, descs, attrs), specs,
                    wants_grad)
    if cache_key is not None:
        plans = info.plans
        if len(plans) >= _PLAN_CACHE_LIMIT:
            plans.clear()
        plans[cache_key] = plan
    return plan


def infer_shapes(info: OpInfo, descs: dict, attrs: dict, declared: dict | None = None) -> dict:
    """``{output slot: [(shape, dtype)]}``: the op's shape rule on the temporary block of
    ``descs`` (an op without a rule sets nothing)."""
    ctx = InferShapeContext(info.type, descs, attrs, declared)
    if info.infer_shape is not None:
        info.infer_shape(ctx)
    return ctx.outs


def invoke(plan: CallPlan, arrays: dict, wants=None, names: dict | None = None) -> tuple:
    """Run ``plan``'s kernel on ``arrays`` (``{slot: array or [array]}``): one entry per output
    slot. ``wants`` names the output slots the caller needs (None: all); ``names`` maps output
    slots to their variables or names, for the NaN/Inf check's message."""
    if _flags.checking:
        result = run_kernel(plan.info, plan.kernel, arrays, plan.attrs, wants, names or {})
    else:
        result = plan.call(arrays, plan.attrs, wants)
    return result if len(plan.outputs) != 1 else (result,)


def _positional(kernel, info: OpInfo, attrs: dict, dtype: int):
    """The kernel's call for one plan: ``kernel.for_attrs(attrs, dtype)`` (the kernel with
    these attributes fixed, when it offers one), else ``kernel.positional``; for a stand-in
    kernel with only ``call`` (tests), the same call made from it."""
    for_attrs = getattr(kernel, "for_attrs", None)
    if for_attrs is not None:
        return for_attrs(attrs, dtype)
    positional = getattr(kernel, "positional", None)
    if positional is not None:
        return positional
    names, call = info.input_names, kernel.call
    return lambda attrs, wants, *arrays: call(dict(zip(names, arrays)), attrs, wants)


def kernel_dtype(info: OpInfo, descs: dict, attrs: dict) -> int:
    """The dtype that picks the kernel: the first floating input, else the first input, else the
    ``dtype`` attribute."""
    first = None
    for slot in info.input_names:
        for d in descs.get(slot, ()):
            if d.dtype in dtypes.FLOATING:
                return d.dtype
            if first is None:
                first = d.dtype
    if first is not None:
        return first
    return attrs.get(info.kernel_dtype_attr, dtypes.FP32)
