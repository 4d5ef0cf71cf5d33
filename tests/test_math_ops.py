"""abs, pow, softplus, elementwise_min / max / pow where the generic test does not look: at the
points its random cases keep away from (0 for abs and pow, ties and NaN for min and max, 0 for
elementwise_pow, the threshold of softplus) against live PaddlePaddle, and their bad inputs."""
import numpy as np
import pytest
from paddle_ops import needs_paddle, paddle_op_results
from static.paddle_runner import paddle_predict

import tape
from tape import layers, ops, static
from tape.testing import vjp

NAN, INF = float("nan"), float("inf")
_GRID, _COLUMN = np.arange(24.0).reshape(2, 3, 4) % 5, [[1.0], [2.0], [3.0]]   # with ties
# name: (op type, {slot: values}, attrs); every input but FactorTensor gets a gradient
CASES = {
    "abs": ("abs", {"X": [-1.5, 0.0, -0.0, 2.0, 0.25]}, {}),
    "pow_0": ("pow", {"X": [-2.0, 0.0, 0.5, 2.0]}, {"factor": 0.0}),
    "pow_half": ("pow", {"X": [0.0, 0.25, 4.0]}, {"factor": 0.5}),
    "pow_3": ("pow", {"X": [-2.0, 0.0, 1.5]}, {"factor": 3.0}),
    "pow_tensor": ("pow", {"X": [-2.0, 0.5, 2.0], "FactorTensor": [3.0]}, {"factor": 1.0}),
    "max_ties": ("elementwise_max", {"X": [1.0, 2.0, 3.0, NAN, 1.0, INF],
                                     "Y": [1.0, 1.0, 4.0, 1.0, NAN, INF]}, {"axis": -1}),
    "min_ties": ("elementwise_min", {"X": [1.0, 2.0, 3.0, NAN, 1.0, -INF],
                                     "Y": [1.0, 1.0, 4.0, 1.0, NAN, -INF]}, {"axis": -1}),
    # broadcast with axis -1: Paddle 3.3.1's max, min and pow grad kernels ignore axis (and so
    # fail on X (2, 3, 4), Y (3,), axis 1, which their forward kernels and Tape's take)
    "max_broadcast": ("elementwise_max", {"X": _GRID, "Y": _COLUMN}, {"axis": -1}),
    "min_broadcast": ("elementwise_min", {"X": _GRID, "Y": _COLUMN}, {"axis": -1}),
    "pow_edges": ("elementwise_pow", {"X": [0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 2.0, 0.5],
                                      "Y": [0.0, 0.5, -1.0, 1.0, 2.0, 0.0, 0.5, -2.0]},
                  {"axis": -1}),
    "pow_broadcast": ("elementwise_pow", {"X": _GRID / 2 + 0.5, "Y": [[1.0], [0.0], [-1.5]]},
                      {"axis": -1}),
    "softplus": ("softplus", {"X": [-50.0, -1.0, 1.0, 1.4, 1.6, 19.0, 21.0]},
                 {"beta": 2.0, "threshold": 3.0}),
    "softplus_defaults": ("softplus", {"X": [-50.0, -1.0, 0.0, 19.0, 21.0, 40.0]}, {}),
    "softplus_negative_beta": ("softplus", {"X": [-30.0, -1.0, 1.0]},
                               {"beta": -1.0, "threshold": 20.0}),
}
DTYPES = ("float64", "float32")
# (rtol, atol): where exp(beta * X) is below rounding, Paddle's log(1 + exp(beta * X)) is 0 and
# Tape's log1p(exp(beta * X)) keeps it (softplus(-50) = 1.9e-22)
TOLERANCE = {"float64": (1e-12, 1e-15), "float32": (1e-6, 1e-7)}


def _inputs(case, dtype):
    _, values, _ = CASES[case]
    return {slot: np.asarray(v, dtype) for slot, v in values.items()}


def _cotangent(case, dtype):
    """Random, in Out's shape (the cases broadcast as numpy does)."""
    shape = np.broadcast_shapes(*(a.shape for s, a in _inputs(case, dtype).items()
                                  if s != "FactorTensor"))
    return np.random.default_rng(len(case)).standard_normal(shape).astype(dtype)


@pytest.fixture(scope="module")
def paddle_results(tmp_path_factory):
    """``{"<case>@<dtype>": {"Out": ..., "d<Slot>": ...}}``: Paddle's outputs and input
    gradients for the cotangents of ``_cotangent``, from one Paddle process."""
    cases = {}
    for case, (op_type, values, attrs) in CASES.items():
        for dtype in DTYPES:
            cases[f"{case}@{dtype}"] = (op_type, _inputs(case, dtype), ["Out"], attrs,
                                        [s for s in values if s != "FactorTensor"],
                                        _cotangent(case, dtype))
    return paddle_op_results(tmp_path_factory.mktemp("paddle_math"), cases)


@needs_paddle
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_paddle(paddle_results, case, dtype):
    op_type, _, attrs = CASES[case]
    with np.errstate(all="ignore"):     # the cases hold 0 ** -1, log(0), nan
        outputs, grads = vjp(op_type, _inputs(case, dtype), attrs,
                             {"Out": _cotangent(case, dtype)})
    got = {"Out": outputs["Out"][0].value(), **{"d" + s: g[0] for s, g in grads.items()}}
    assert sorted(got) == sorted(paddle_results[f"{case}@{dtype}"])
    for name, value in got.items():
        want = paddle_results[f"{case}@{dtype}"][name]
        assert value.dtype == want.dtype, f"{case} {name}"
        np.testing.assert_allclose(value, want, *TOLERANCE[dtype], err_msg=f"{case} {name}")


@needs_paddle
def test_paddle_serves_a_tape_program_of_these_ops(tmp_path):
    tape.seed(0)    # the weights, so the outputs are the same every run (none near zero)
    linear = layers.Linear(4, 3)

    def net(x):
        h = linear(x)
        a = ops.pow(ops.abs(h), factor=1.5)
        # threshold stays 20, out of reach: the predictor's oneDNN softplus (on by default, with
        # IR optimisation) ignores it, where Paddle's own kernel and Executor do not
        b = ops.softplus(h, beta=2.0)
        return ops.elementwise_pow(ops.elementwise_min(a, b), ops.elementwise_max(a, b))

    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    static.save_inference_model(tmp_path, static.trace(net, x))
    with tape.no_grad():
        want = net(tape.Variable(x)).value()
    np.testing.assert_allclose(paddle_predict(tmp_path, x), want, rtol=1e-5)


def test_max_and_min_split_a_tie():
    x = tape.Variable(np.array([1.0, 2.0, 3.0]), stop_gradient=False)
    y = tape.Variable(np.array([1.0, 1.0, 4.0]), stop_gradient=False)
    loss = ops.reduce_sum(ops.elementwise_add(ops.elementwise_max(x, y),
                                              ops.scale(ops.elementwise_min(x, y), scale=10.0)),
                          reduce_all=True)
    loss.backward()
    np.testing.assert_array_equal(x.grad.value(), [5.5, 1.0, 10.0])
    np.testing.assert_array_equal(y.grad.value(), [5.5, 10.0, 1.0])


def var(values):
    return tape.Variable(np.asarray(values, np.float64))


@pytest.mark.parametrize("op_type, call, fragments", [
    ("softplus", lambda: ops.softplus(var([1.0]), beta=0.0),
     ["softplus", "attribute beta", "nonzero", "received 0.0"]),
    ("softplus", lambda: ops.softplus(tape.Variable(np.array([1], np.int64))),
     ["softplus", "input X", "floating point", "int64"]),
    ("pow", lambda: ops.pow(var([1.0]), var([2.0, 3.0])),
     ["pow", "input FactorTensor", "one element", "(2,)"]),
    ("pow", lambda: ops.pow(var([1.0]), tape.Variable(np.array([2], np.int64))),
     ["pow", "input FactorTensor", "floating point", "int64"]),
    ("elementwise_min", lambda: ops.elementwise_min(var(np.ones((2, 3))), var([1.0, 2.0])),
     ["elementwise_min", "X (2, 3)", "Y (2,)", "do not broadcast"]),
    ("elementwise_pow", lambda: ops.elementwise_pow(var([1.0]), tape.Variable(np.ones(1, "f4"))),
     ["elementwise_pow", "same dtype", "float64 and float32"]),
])
def test_bad_input_is_reported_before_any_kernel(op_type, call, fragments,
                                                 reported_before_kernel):
    reported_before_kernel(op_type, call, fragments)
