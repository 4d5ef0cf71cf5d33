"""Running an op's CUDA kernel next to its CPU kernel on the op's generic-test cases.

Inputs are the op's ``case`` drawn from a seed, floats cast to the dtype; a grad op gets the
forward outputs of the CPU kernel and a random output gradient, and its shape-only inputs as
zero-strided arrays, as the tape gives them. Each kernel gets its own copies (optimizers update
in place). Under the simulator device arrays are numpy arrays; with ``TAPE_CUDA_TESTS=device``
they are cupy arrays.
"""
import os

import numpy as np

import tape
from tape.grad_steps import (
    FWD_IN,
    FWD_OUT,
    META_IN,
    META_OUT,
    OPT_OUT_GRAD,
    OUT_GRAD,
    grad_steps,
)
from tape.kernel_binding import Kernel
from tape.kernels import cuda as gpu
from tape.registry import REGISTRY, GradOp
from tape.testing import Draw

ON_DEVICE = os.environ.get("TAPE_CUDA_TESTS") == "device"
DTYPES = {np.dtype(np.float32): tape.dtypes.FP32, np.dtype(np.float64): tape.dtypes.FP64}
SEED = 1234   # reseeds the random ops before each kernel runs


def _cast(a, dtype):
    a = np.asarray(a)
    return a.astype(dtype) if a.dtype.kind == "f" else a.copy()


def _map(fn, value):
    if isinstance(value, (list, tuple)):
        return [fn(a) for a in value]
    return None if value is None else fn(value)


def forward_case(op_type, seed, dtype):
    """``(inputs, full attrs)`` of the op's case ``seed`` in ``dtype``."""
    info = REGISTRY[op_type]
    inputs, attrs = info.case(Draw.from_seed(seed))
    return ({slot: _map(lambda a: _cast(a, dtype), v) for slot, v in inputs.items()},
            info.check_attrs(attrs))


def _shape_only(a):
    return np.broadcast_to(np.zeros((), a.dtype), a.shape)


def grad_case(op_type, seed, dtype):
    """``(grad op type, inputs, attrs, wants)`` for the gradient of ``op_type``'s case ``seed``.

    The grad op is the one step of the op's GradOp, with its slots bound as the tape binds them
    (``tape.grad_steps``). ``wants``, by seed: the gradients of every floating input, of the
    first, of the last. An optional output gradient (dispensable) is given for odd seeds only.
    """
    info = REGISTRY[op_type]
    inputs, attrs = forward_case(op_type, seed, dtype)
    outputs = run_kernel(info.kernel(tape.CPUPlace(), DTYPES[np.dtype(dtype)]), op_type,
                         inputs, attrs, set(info.output_names))
    forward = {FWD_IN: inputs, FWD_OUT: dict(zip(info.output_names, outputs))}
    forward.update({META_IN: forward[FWD_IN], META_OUT: forward[FWD_OUT],
                    OUT_GRAD: forward[FWD_OUT], OPT_OUT_GRAD: forward[FWD_OUT]})
    counts = {slot: len(_arrays(v)) for slot, v in inputs.items() if v is not None}
    (step,) = grad_steps(info, counts, {s: len(_arrays(v)) for s, v in forward[FWD_OUT].items()
                                         if v is not None}, attrs)
    rng = np.random.default_rng(seed)
    grad_inputs = {}
    for slot, _, bound in step.ins:
        if not bound:   # a dispensable forward slot left empty
            continue
        kind, fslot, _ = bound[0]
        value = forward[kind].get(fslot)
        if value is None or (kind == OPT_OUT_GRAD and seed % 2 == 0):
            continue
        if kind in (OUT_GRAD, OPT_OUT_GRAD):
            value = _map(lambda a: rng.uniform(-1, 1, a.shape).astype(a.dtype), value)
        elif kind in (META_IN, META_OUT):
            value = _map(_shape_only, value)
        grad_inputs[slot] = value
    wants = [slot for slot, _, bound in step.outs
             if all(a.dtype.kind == "f" for _, fslot, _ in bound
                    for a in _arrays(inputs.get(fslot)))]
    return step.info.type, grad_inputs, attrs, set((wants, wants[:1], wants[-1:])[seed % 3])


def _arrays(value):
    if value is None:
        return [np.zeros(0, np.int64)]    # an absent input gets no gradient
    return value if isinstance(value, (list, tuple)) else [value]


def has_grad_kernel(op_type):
    info = REGISTRY[op_type]
    return isinstance(info.grad, GradOp) and info.grad.type in gpu.KERNELS


def run_kernel(kernel, op_type, inputs, attrs, wants, device=False):
    """Run ``kernel`` on copies of ``inputs`` (on the device if asked; shape-only stand-ins
    stay host arrays, as the tape's do); outputs as a tuple of host arrays, lists or None."""
    def place(a):
        if a.strides and not any(a.strides):
            return a
        return gpu.to_device(a.copy()) if device else a.copy()

    tape.seed(SEED)
    result = kernel.call({slot: _map(place, v) for slot, v in inputs.items()}, attrs, wants)
    outputs = result if isinstance(result, tuple) else (result,)
    return tuple(_map(gpu.to_host, out) for out in outputs)


def run_both(op_type, inputs, attrs, wants=None):
    """``(cpu outputs, cuda outputs)`` of the op's two kernels on the same inputs."""
    info = REGISTRY[op_type]
    wants = set(info.output_names) if wants is None else wants
    # the kernel the tape picks: by the first floating input, else the first input (one_hot_v2)
    arrays = [a for v in inputs.values() for a in _arrays(v)]
    dtype = next((a.dtype for a in arrays if a.dtype.kind == "f"),
                 arrays[0].dtype if arrays else np.dtype(np.float64))
    cpu = run_kernel(info.kernel(tape.CPUPlace(), tape.dtypes.from_numpy(dtype)),
                     op_type, inputs, attrs, wants)
    cuda = run_kernel(Kernel(gpu.KERNELS[op_type], info), op_type, inputs, attrs, wants,
                      device=ON_DEVICE)
    return cpu, cuda


def max_difference(cpu, cuda):
    """The largest absolute difference over all outputs, relative to the largest |cpu| value
    (at least 1)."""
    worst = 0.0
    for a, b in zip(_flatten(cpu), _flatten(cuda)):
        if a is not None and a.size and a.dtype.kind == "f":
            scale = max(1.0, float(np.max(np.abs(a))))
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b))) / scale)
    return worst


def _flatten(outputs):
    for out in outputs:
        yield from (out if isinstance(out, list) else [out])
