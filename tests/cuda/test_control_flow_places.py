"""Control flow on CUDAPlace (under the simulator): a traced while + cond program and its
static gradients give on the device, with the CUDA kernels, what they give on the host."""
import numpy as np

import tape
from tape import dtypes, layers
from tape.registry import op_info

nn = tape.static.nn


def _program():
    tape.seed(6)
    lin = layers.Linear(3, 3, act="tanh", dtype="float64")

    def fn(x, n):
        i = tape.ops.fill_constant(shape=[1], dtype=dtypes.INT64, value=0.0)
        _, s = nn.while_loop(lambda i, s: i < n, lambda i, s: [tape.ops.increment(i), lin(s)],
                             [i, x])
        return tape.ops.mean(nn.cond(s.mean() > 0, lambda: s * s, lambda: s * 3.0))
    x = np.array([[0.5, -0.2, 0.9], [1.0, 0.3, -0.4]])
    program = tape.static.trace(fn, x, np.array([2]))
    pairs = tape.static.append_backward(program, program.fetch_names[0])
    return program, [program.fetch_names[0]] + [g for _, g in pairs], x


def test_control_flow_and_its_gradients_on_cuda_match_cpu(monkeypatch):
    calls = []
    for op_type in ("mul", "mul_grad"):     # in the loop's block and its gradient block
        kernel = op_info(op_type).kernel(tape.CUDAPlace(0), dtypes.FP64)
        monkeypatch.setattr(kernel, "call", lambda *a, k=kernel.call, t=op_type:
                            calls.append(t) or k(*a))
    results = {}
    for place in (tape.CPUPlace(), tape.CUDAPlace(0)):
        program, fetch, x = _program()
        exe = tape.static.Executor(place)
        results[place.key] = [exe.run(program, {"input_0": xx, "input_1": np.array([n])}, fetch)
                              for xx, n in ((x, 2), (-x, 0), (0.3 * x, 4))]
    assert calls.count("mul") == 6 and calls.count("mul_grad") == 6     # 2 + 0 + 4 trips
    cpu, gpu = results.values()
    for got, expected in zip(gpu, cpu):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-12)
