"""The vision model zoo's ops (depthwise and transposed convolutions, group and instance norm,
interpolation, pad3d) against live PaddlePaddle: each op's generic-test cases, drawn from fixed
seeds, run by Paddle's own op (in a legacy program, one Paddle process for all) and by Tape's;
every output Paddle declares (the saved statistics too) and every input gradient must agree in
float64, but where PADDLE_BUGS says Paddle is wrong.

A listed bug must show on its cases (else the entry is stale), and only in the gradients it
names, while Paddle's forward outputs still match Tape's: the generic test (tests/test_ops.py)
checks Tape's gradients against central differences of Tape's forward, so a Paddle gradient
that differs from Tape's differs from the derivative of Paddle's own forward."""
import numpy as np
import pytest
from paddle_ops import needs_paddle, paddle_op_results

from tape import dtypes
from tape.registry import REGISTRY
from tape.testing import Draw, vjp

OPS = ["depthwise_conv2d", "conv2d_transpose", "depthwise_conv2d_transpose", "group_norm",
       "instance_norm"]
SEEDS = range(12)
# float64 against Paddle's float64 kernels, which sum in other orders (and normalisation's
# gradients subtract nearly equal terms): relative to each array's largest value
RTOL = 1e-8

# (op, the cases it hits, the arrays Paddle gets wrong, what Paddle does)
PADDLE_BUGS = [
    ("group_norm", lambda ins: "Scale" not in ins, {"dX"},
     "without Scale, its group_norm_grad kernel computes X's gradient wrongly (it differs from "
     "the derivative of its own forward)"),
    ("instance_norm", lambda ins: ("Scale" in ins) != ("Bias" in ins), {"dScale", "dBias"},
     "its grad op writes Scale@GRAD and Bias@GRAD only when both Scale and Bias are given: "
     "with one of them the other's gradient is never computed (fetched as None)"),
]


def _case(op_type, seed):
    """(inputs, every attribute, the output slots, the input slots to differentiate)."""
    info = REGISTRY[op_type]
    inputs, attrs = info.case(Draw.from_seed(seed))
    attrs = dict(info.check_attrs(attrs))
    if "epsilon" in attrs:   # Paddle holds it as a float32: compare the same epsilon
        attrs["epsilon"] = float(np.float32(attrs["epsilon"]))
    wrt = [s for s in info.input_names if s in inputs and
           dtypes.from_numpy(np.asarray(inputs[s]).dtype) in dtypes.FLOATING]
    return inputs, attrs, list(info.output_names), wrt


def _cotangent(op_type, seed, inputs, attrs):
    outputs, _ = vjp(op_type, inputs, attrs, {})
    first = REGISTRY[op_type].output_names[0]
    return np.random.default_rng(seed).standard_normal(outputs[first][0].value().shape)


CASES = [(op, seed) for op in OPS for seed in SEEDS]


@pytest.fixture(scope="module")
def paddle_results(tmp_path_factory):
    cases = {}
    for op_type, seed in CASES:
        inputs, attrs, outputs, wrt = _case(op_type, seed)
        cases[f"{op_type}-{seed}"] = (op_type, inputs, outputs, _paddle_attrs(attrs), wrt,
                                      _cotangent(op_type, seed, inputs, attrs))
    return paddle_op_results(tmp_path_factory.mktemp("paddle_vision"), cases)


def _paddle_attrs(attrs):
    """Attributes as Paddle's append_op takes them (lists, not tuples)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


@needs_paddle
@pytest.mark.parametrize("op_type,seed", CASES)
def test_matches_paddle(paddle_results, op_type, seed):
    inputs, attrs, output_slots, wrt = _case(op_type, seed)
    cotangent = _cotangent(op_type, seed, inputs, attrs)
    outputs, grads = vjp(op_type, inputs, attrs, {output_slots[0]: cotangent})
    want = paddle_results[f"{op_type}-{seed}"]
    got = {slot: outputs[slot][0].value() for slot in output_slots if outputs.get(slot)}
    got.update({"d" + slot: grads[slot][0] for slot in wrt})
    wrong = {}
    for name, value in got.items():
        paddle = want.get(name)
        if paddle is None or paddle.dtype == object or paddle.shape != value.shape:
            wrong[name] = f"Paddle gives {None if paddle is None else paddle.dtype} " \
                          f"{None if paddle is None else paddle.shape}, Tape {value.shape}"
            continue
        scale = max(1.0, float(np.abs(paddle).max(initial=0)))
        if not np.allclose(value, paddle, rtol=RTOL, atol=RTOL * scale):
            wrong[name] = f"largest difference {np.abs(value - paddle).max():.3g} " \
                          f"(scale {scale:.3g})"
    bugs = [(arrays, reason) for op, hits, arrays, reason in PADDLE_BUGS
            if op == op_type and hits(inputs)]
    if not bugs:
        assert not wrong, f"{op_type}-{seed} {attrs}: {wrong}"
        return
    ((arrays, reason),) = bugs
    assert wrong and set(wrong) <= arrays, \
        f"{op_type}-{seed}: the listed Paddle bug ({reason}) does not show as listed: {wrong}"
    pytest.xfail(f"{op_type}: Paddle's bug: {reason}")
