"""A ``tape.function`` cell on CUDAPlace (under numba's CUDA simulator in CI) gives the CPU's
outputs and gradients, eager and lazy (one call and a batch of calls), through the CUDA kernels
of its traced ops; a trace made on one place is not used on another."""
import contextlib

import numpy as np
import pytest

import tape
from tape import layers
from tape.registry import op_info

CPU, GPU = tape.CPUPlace(), tape.CUDAPlace(0)
RNG = np.random.default_rng(11)
XS = RNG.standard_normal((3, 2, 4))
H0 = RNG.standard_normal((2, 5))
TRACED_OPS = ("matmul_v2", "elementwise_add", "sigmoid", "tanh", "elementwise_mul")


def _model(place):
    """A GRU-like step as a tape.function over a Linear (its parameters captured)."""
    tape.seed(3)
    linear = layers.Linear(4 + 5, 5, dtype="float64")
    if place is GPU:
        linear = linear.to(GPU)
    ops = tape.ops

    @tape.function
    def step(x, h):
        z = ops.sigmoid(linear(ops.concat([x, h], axis=1)))
        return z * h + (1.0 - z) * ops.tanh(x @ linear.w[:4] + linear.b)

    return linear, step


def _run(place, lazy: bool, sequences: int = 1):
    """Every sequence's final h and the gradients of the parameters, of the inputs and of the
    first state, for the loss sum(final h's)."""
    linear, step = _model(place)
    tape.reset_global_tape()
    with tape.lazy() if lazy else contextlib.nullcontext():
        xs = [tape.Variable(XS * (1 + k), stop_gradient=False, place=place)
              for k in range(sequences)]
        h0 = tape.Variable(H0, stop_gradient=False, place=place)
        finals = []
        for x in xs:
            h = h0
            for t in range(XS.shape[0]):
                h = step(x[t], h)
            finals.append(h)
        loss = tape.ops.sum([tape.ops.reduce_sum(h, reduce_all=True) for h in finals])
        loss.backward()
        assert all(h.place is place for h in finals)
        return ([h.numpy() for h in finals] + [p.grad.numpy() for p in linear.params()]
                + [x.grad.numpy() for x in xs] + [h0.grad.numpy()])


@pytest.mark.parametrize("lazy, sequences", [(False, 1), (True, 1), (True, 3)])
def test_a_function_on_cuda_gives_the_cpu_outputs_and_gradients(monkeypatch, lazy, sequences):
    want = _run(CPU, lazy, sequences)
    calls = []
    for op_type in TRACED_OPS:
        kernel = op_info(op_type).kernel(GPU, tape.dtypes.FP64)
        call = kernel.call
        monkeypatch.setattr(kernel, "call", lambda *a, t=op_type, c=call: calls.append(t) or c(*a))
    got = _run(GPU, lazy, sequences)
    assert set(calls) == set(TRACED_OPS)
    for ours, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-13)


def _sequences_run(place):
    """The loss and gradients of 3 sequence losses (a tape.function that cuts its steps from
    one argument and averages their outputs: its calls batch stacked, ``tape.function_stacking``)
    on a lazy tape, with a captured start state that wants a gradient (tiled per call)."""
    linear, step = _model(place)
    ops = tape.ops
    tape.reset_global_tape()
    h0 = tape.Variable(H0[:1], stop_gradient=False, place=place)

    @tape.function
    def sequence(x):
        h, hs = h0, []
        for row in ops.split(x, num=XS.shape[1], axis=0):
            h = step(row, h)
            hs.append(h)
        return ops.mean(ops.concat(hs, axis=0))

    with tape.lazy():
        xs = [tape.Variable(XS[k], stop_gradient=False, place=place) for k in range(3)]
        loss = ops.sum([sequence(x) for x in xs])
        loss.backward()
        return ([loss.numpy()] + [p.grad.numpy() for p in linear.params()]
                + [x.grad.numpy() for x in xs] + [h0.grad.numpy()])


def test_stacked_function_calls_on_cuda_give_the_cpu_outputs_and_gradients(monkeypatch):
    want = _sequences_run(CPU)
    calls = []
    for op_type in ("reshape2", "tile", "reduce_mean"):
        kernel = op_info(op_type).kernel(GPU, tape.dtypes.FP64)
        call = kernel.call
        monkeypatch.setattr(kernel, "call", lambda *a, t=op_type, c=call: calls.append(t) or c(*a))
    got = _sequences_run(GPU)
    assert {"reshape2", "tile", "reduce_mean"} <= set(calls)
    for ours, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-13)
