"""Checking an op: forward against a numpy reference, gradient against finite differences.

``check_grad`` compares the tape's vector-Jacobian product with float64 central differences along
a random direction, one differentiable input slot at a time, and then checks that the float32
gradient matches the float64 one in dtype and value. ``check_forward`` runs an op in one dtype
and compares every output's declared shape and dtype, its array, and its values with a reference.
"""
from __future__ import annotations

import inspect

import numpy as np

from .. import dtypes
from ..backward import run_backward
from ..errors import NotFoundError
from ..grad_steps import grad_steps
from ..place import CPU
from ..registry import OpInfo, op_info
from ..tape import Tape
from ..variable import Variable

# float64 references are exact up to rounding; float32 kernels may sum in another order
FORWARD_RTOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-5}
FLOAT32_GRAD_RTOL = 1e-4


def _is_float(array) -> bool:
    return np.issubdtype(np.asarray(array).dtype, np.floating)


def _slot_arrays(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _cast(inputs: dict, dtype=None) -> dict:
    """Fresh copies of the input arrays, floating ones converted to ``dtype`` (if given)."""
    def cast(a):
        a = np.asarray(a)
        return a.astype(dtype if dtype is not None and _is_float(a) else a.dtype)
    return {slot: [cast(a) for a in v] if isinstance(v, (list, tuple)) else cast(v)
            for slot, v in inputs.items()}


def _differentiable_slots(info: OpInfo, inputs: dict, attrs=None) -> list:
    """Floating input slots that get a gradient: declared in the grad maker's ``grads`` or
    written by one of its grad steps."""
    if info.grad is None:
        return []
    written = {slot for step in _grad_steps(info, inputs, attrs)
               for slot in step.input_grad_slots()}
    return [s for s in info.input_names if s in inputs
            and (s in info.grad.grads or s in written)
            and all(_is_float(a) for a in _slot_arrays(inputs[s]))]


def _variables(inputs: dict, wrt=()) -> dict:
    return {slot: [Variable(a, stop_gradient=slot not in wrt) for a in _slot_arrays(v)]
            for slot, v in inputs.items()}


def run_op(op_type: str, inputs: dict, attrs: dict | None = None) -> dict:
    """Run an op once on a private tape, recording nothing: ``{output slot: [Variable]}``.

    ``inputs`` maps slot -> array (a list of arrays for a duplicable slot).
    """
    return Tape().run(op_info(op_type), _variables(inputs), attrs)


def _grad_steps(info: OpInfo, inputs: dict | None, attrs: dict | None) -> tuple:
    """The grad steps of the op on ``inputs`` (one variable per slot when not given)."""
    ins = {s.name: len(_slot_arrays(inputs[s.name])) if inputs and s.name in inputs else 1
           for s in info.inputs}
    return grad_steps(info, ins, {s.name: 1 for s in info.outputs},
                      info.check_attrs(attrs))


def grad_op_types(op_type: str, inputs: dict | None = None, attrs: dict | None = None) -> list:
    """The grad op types an op's grad maker emits (for ``inputs``/``attrs``, else one of each)."""
    return list(dict.fromkeys(step.info.type
                              for step in _grad_steps(op_info(op_type), inputs, attrs)))


def _differentiable_outputs(info: OpInfo, inputs: dict, attrs) -> set:
    """Output slots whose gradient some grad step reads: an op may declare an output that is
    not differentiated through (its grad maker never reads that gradient)."""
    return {slot for step in _grad_steps(info, inputs, attrs)
            for slot in step.output_grad_slots()}


def vjp(op_type: str, inputs: dict, attrs: dict | None, cotangents: dict):
    """The tape's vector-Jacobian product of one op.

    ``cotangents`` maps output slot -> array (a list for a duplicable slot). Returns
    ``(outputs, grads)``: ``{output slot: [Variable]}`` and ``{input slot: [array]}`` for every
    differentiable floating input slot (zeros where no gradient arrived).
    """
    info = op_info(op_type)
    wrt = _differentiable_slots(info, inputs, attrs)
    variables = _variables(inputs, wrt)
    tape = Tape()
    outputs = tape.run(info, variables, attrs)
    seeds = {}
    for slot, cts in cotangents.items():
        for v, c in zip(outputs[slot], _slot_arrays(cts)):
            seeds[v.desc] = np.asarray(c, dtype=v.dtype)
    if wrt and not len(tape):
        raise AssertionError(f"{op_type}: the op was not recorded on the tape (inside no_grad?)")
    run_backward(list(tape), seeds)
    grads = {slot: [np.zeros_like(v.value()) if v.grad is None else v.grad.value()
                    for v in variables[slot]] for slot in wrt}
    return outputs, grads


def _float_outputs(info: OpInfo, outputs: dict) -> list:
    """The non-intermediate floating output slots that were produced: what gets a cotangent."""
    return [s for s in info.visible_outputs if s in outputs
            and all(dtypes.to_numpy(v.desc.dtype).kind == "f" for v in outputs[s])]


def _describe(inputs: dict, attrs) -> str:
    def shape(v):
        return [np.shape(a) for a in v] if isinstance(v, (list, tuple)) else np.shape(v)
    shapes = ", ".join(f"{s}={shape(v)}" for s, v in inputs.items())
    return f"inputs {shapes}; attrs {attrs or {}}"


def check_grad(op_type: str, inputs: dict, attrs: dict | None = None, *, rtol: float = 1e-6,
               atol: float = 1e-8, seed: int = 0) -> None:
    """Check an op's gradient against float64 central differences along a random direction.

    Every floating non-intermediate output whose gradient the grad maker reads gets a random
    cotangent ``c``. For each differentiable input slot ``x`` and a random direction ``v``, the
    tape's vector-Jacobian product ``<vjp(c), v>`` must equal the central difference
    ``<c, (f(x + h v) - f(x - h v)) / 2h>`` (``h`` = 1e-6 scaled to ``x``) within
    ``atol + rtol * max(|analytic|, |numeric|, sum |vjp(c) * v|)`` plus the rounding noise of the
    difference (measured against the same difference with step ``2h``). Then, when the op has
    float32 kernels, its float32 gradient must be float32 and match the float64 one (1e-4).
    Raises AssertionError naming the op, the slot and both values.

    >>> check_grad("elementwise_mul", {"X": np.ones((2, 3)), "Y": np.arange(3.0)})
    """
    info = op_info(op_type)
    inputs = _cast(inputs, np.float64)
    wrt = _differentiable_slots(info, inputs, attrs)
    if not wrt:
        return
    rng = np.random.default_rng(seed)
    outputs = Tape().run(info, _variables(inputs), attrs)
    differentiable = _differentiable_outputs(info, inputs, attrs)
    cotangents = {s: [rng.standard_normal(v.shape) for v in outputs[s]]
                  for s in _float_outputs(info, outputs) if s in differentiable}
    _, grads = vjp(op_type, inputs, attrs, cotangents)
    where = _describe(inputs, attrs)
    for slot in wrt:
        xs = _slot_arrays(inputs[slot])
        for x, g in zip(xs, grads[slot]):
            if g.shape != x.shape or g.dtype != x.dtype:
                raise AssertionError(f"{op_type}: gradient of input '{slot}' is {g.dtype} "
                                     f"{g.shape}, expected {x.dtype} {x.shape}; {where}")
        directions = [rng.uniform(-1.0, 1.0, x.shape) for x in xs]
        h = 1e-6 * max(1.0, max((float(np.max(np.abs(x))) for x in xs if x.size), default=1.0))
        numeric = _central_difference(info, inputs, attrs, slot, directions, cotangents, h)
        # Rounding makes the difference quotient noisy where outputs cancel; the same quotient
        # with twice the step measures that noise (for a smooth op the two agree otherwise).
        noise = abs(numeric - _central_difference(info, inputs, attrs, slot, directions,
                                                   cotangents, 2 * h))
        analytic = sum(float(np.sum(g * v)) for g, v in zip(grads[slot], directions))
        scale = sum(float(np.sum(np.abs(g * v))) for g, v in zip(grads[slot], directions))
        tolerance = atol + rtol * max(abs(analytic), abs(numeric), scale) + noise
        if not abs(analytic - numeric) <= tolerance:
            raise AssertionError(
                f"{op_type}: gradient of input '{slot}' disagrees with finite differences: "
                f"vector-Jacobian product {analytic:.12g}, central difference {numeric:.12g} "
                f"(|difference| {abs(analytic - numeric):.3g} > tolerance {tolerance:.3g}, "
                f"step {h:.3g}); {where}")
    if _has_float32_kernels(info, inputs, attrs):
        _check_float32_grad(op_type, inputs, attrs, cotangents, grads, where)


def _central_difference(info, inputs, attrs, slot, directions, cotangents, h) -> float:
    """``<c, (f(x + h v) - f(x - h v)) / 2h>`` with ``x`` the input ``slot``."""
    def outputs_at(sign):
        moved = [x + sign * h * v for x, v in zip(_slot_arrays(inputs[slot]), directions)]
        perturbed = {**inputs, slot: moved if isinstance(inputs[slot], (list, tuple)) else moved[0]}
        outs = Tape().run(info, _variables(perturbed), attrs)
        return {s: [v.value() for v in outs[s]] for s in cotangents}
    plus, minus = outputs_at(1.0), outputs_at(-1.0)
    return sum(float(np.sum(c * (p - m))) for s, cs in cotangents.items()
               for c, p, m in zip(cs, plus[s], minus[s])) / (2 * h)


def _has_float32_kernels(info: OpInfo, inputs: dict, attrs) -> bool:
    try:
        for t in [info.type] + grad_op_types(info.type, inputs, attrs):
            op_info(t).kernel(CPU, dtypes.FP32)
    except NotFoundError:
        return False
    return True


def _check_float32_grad(op_type, inputs, attrs, cotangents, grads64, where):
    inputs32 = _cast(inputs, np.float32)
    cotangents32 = {s: [c.astype(np.float32) for c in cs] for s, cs in cotangents.items()}
    _, grads32 = vjp(op_type, inputs32, attrs, cotangents32)
    for slot, gs in grads32.items():
        for g32, g64 in zip(gs, grads64[slot]):
            if g32.dtype != np.float32:
                raise AssertionError(f"{op_type}: gradient of input '{slot}' is {g32.dtype} for "
                                     f"float32 inputs; {where}")
            _assert_close(op_type, f"float32 gradient of input '{slot}'", g32, g64,
                          FLOAT32_GRAD_RTOL, where)


def _assert_close(op_type: str, what: str, actual, expected, rtol: float, where: str) -> None:
    """``|actual - expected| <= rtol * (|expected| + max |expected|)`` elementwise, NaN == NaN."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    finite = np.isfinite(expected)
    scale = float(np.max(np.abs(expected[finite]))) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):   # inf - inf where both are inf: equal, handled below
        error = np.abs(actual - expected)
        bad = ~(error <= rtol * (np.abs(expected) + scale))
    bad &= ~((actual == expected) | (np.isnan(actual) & np.isnan(expected)))
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(error, nan=np.inf), -1)),
                             bad.shape)
        raise AssertionError(
            f"{op_type}: {what} differs from the reference at {bad.sum()} of {bad.size} "
            f"element(s); worst at index {tuple(int(j) for j in i)}: {actual[i]!r} vs "
            f"{expected[i]!r} (rtol {rtol:g}, scale {scale:.3g}); {where}")


def _run_declared(op_type: str, inputs: dict, attrs) -> dict:
    """Run the op; check each output's array against the shape and dtype its desc declares."""
    outputs = run_op(op_type, inputs, attrs)
    for slot, vs in outputs.items():
        for v in vs:
            value = v.value()
            declared = (tuple(v.desc.shape), dtypes.to_numpy(v.desc.dtype))
            if declared != (np.shape(value), np.asarray(value).dtype):
                raise AssertionError(
                    f"{op_type}: output '{slot}' is {np.asarray(value).dtype} "
                    f"{np.shape(value)} but its shape rule declared {declared[1]} "
                    f"{declared[0]}; {_describe(inputs, attrs)}")
    return outputs


def visible_values(op_type: str, outputs: dict):
    """Non-intermediate outputs in proto order as a reference returns them: one array (a list
    for a duplicable slot), or a tuple of them; None for an output that was not produced."""
    info = op_info(op_type)
    values = []
    for slot in info.outputs:
        if slot.intermediate:
            continue
        vs = outputs.get(slot.name)
        arrays = None if vs is None else [v.value() for v in vs]
        values.append(arrays if arrays is None or slot.duplicable else arrays[0])
    return values[0] if len(values) == 1 else tuple(values)


def call_with(fn, inputs: dict, attrs: dict):
    """``fn(**inputs, **attrs)``, passing only the names ``fn`` takes (all if it has **kw)."""
    params = inspect.signature(fn).parameters
    names = {**inputs, **attrs}
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        names = {k: v for k, v in names.items() if k in params}
    return fn(**names)


def _in_place_slots(info: OpInfo) -> set:
    """Inputs an op updates in place by definition, by Paddle's naming (Param -> ParamOut)."""
    outs = set(info.output_names)
    return {s for s in info.input_names if s + "Out" in outs}


def check_forward(op_type: str, inputs: dict, attrs: dict | None, reference, dtype,
                  rtol: float | None = None) -> dict:
    """Run an op with floating inputs cast to ``dtype`` and compare it with ``reference``.

    Checks that every output's array has the shape and dtype its desc declares, that the op
    did not modify its inputs (except Paddle's in-place pairs such as Param -> ParamOut), and that
    each non-intermediate output equals ``reference`` (called with the inputs, upcast to float64,
    and the attributes, defaults filled) within ``rtol`` (float64 ~1e-10, float32 ~1e-5) and has
    the dtype the reference returns for inputs of ``dtype``; with ``reference=None`` (a random
    op, checked by its properties) only the first two. Returns the outputs.
    """
    info = op_info(op_type)
    dtype = np.dtype(dtype)
    rtol = FORWARD_RTOL.get(dtype, 1e-5) if rtol is None else rtol
    given = _cast(inputs, dtype)
    pristine = _cast(given)
    outputs = _run_declared(op_type, given, attrs)
    where = f"{dtype} run; {_describe(inputs, attrs)}"
    for slot in set(given) - _in_place_slots(info):
        for before, after in zip(_slot_arrays(pristine[slot]), _slot_arrays(given[slot])):
            if not np.array_equal(before, after, equal_nan=True):
                raise AssertionError(f"{op_type}: the kernel modified its input '{slot}'; {where}")
    if reference is None:
        return outputs
    full_attrs = info.check_attrs(attrs)
    expected = call_with(reference, _cast(pristine, np.float64), full_attrs)
    typed = expected if dtype == np.float64 else call_with(reference, _cast(pristine), full_attrs)
    slots = [s for s in info.outputs if not s.intermediate]
    if len(slots) == 1:
        expected, typed = (expected,), (typed,)
    if len(expected) != len(slots):
        raise AssertionError(f"{op_type}: the reference returned {len(expected)} outputs, the op "
                             f"has {len(slots)} non-intermediate ones")
    for slot, want, want_typed in zip(slots, expected, typed):
        got = outputs.get(slot.name)
        if want is None or got is None:
            if want is not None or got is not None:
                raise AssertionError(f"{op_type}: output '{slot.name}' is "
                                     f"{'missing' if got is None else 'produced'} but the "
                                     f"reference says otherwise; {where}")
            continue
        if len(got) != len(_slot_arrays(want)):
            raise AssertionError(f"{op_type}: output '{slot.name}' holds {len(got)} arrays, the "
                                 f"reference {len(_slot_arrays(want))}; {where}")
        for v, ref, ref_typed in zip(got, _slot_arrays(want), _slot_arrays(want_typed)):
            _compare_output(op_type, slot.name, v.value(), np.asarray(ref),
                            np.asarray(ref_typed).dtype, rtol, where)
    return outputs


def _compare_output(op_type, slot, value, ref, ref_dtype, rtol, where):
    value = np.asarray(value)
    if value.shape != ref.shape:
        raise AssertionError(f"{op_type}: output '{slot}' has shape {value.shape}, the reference "
                             f"{ref.shape}; {where}")
    if value.dtype != ref_dtype:
        raise AssertionError(f"{op_type}: output '{slot}' is {value.dtype}, the reference "
                             f"gives {ref_dtype}; {where}")
    if value.dtype.kind == "f":
        _assert_close(op_type, f"output '{slot}'", value, ref, rtol, where)
    elif not np.array_equal(value, ref):
        raise AssertionError(f"{op_type}: output '{slot}' differs from the reference: {value!r} "
                             f"vs {ref!r}; {where}")
