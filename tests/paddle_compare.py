"""Comparing ops with live PaddlePaddle case by case: each case's outputs and input gradients
from Tape (``tape.testing.vjp``) against Paddle's, from one Paddle process
(``paddle_ops.paddle_op_results``); a case that Paddle gets wrong is listed with the reason and
must still differ, so a fixed Paddle shows."""
import numpy as np
import pytest
from paddle_ops import paddle_op_results

from tape.testing import run_op, vjp

DTYPES = ("float64", "float32")
TOLERANCE = {"float64": (1e-10, 1e-12), "float32": (1e-5, 1e-6)}


def _float_inputs(values, dtype):
    return {slot: np.asarray(v, dtype) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
            for slot, v in values.items()}


def cotangent(op_type, inputs, attrs):
    """A random float cotangent of the case's Out, or None when Out is not floating."""
    out = run_op(op_type, inputs, attrs)["Out"][0].value()
    if out.dtype.kind != "f":
        return None
    return np.random.default_rng(out.size).standard_normal(out.shape).astype(out.dtype)


def paddle_cases(cases, outputs=None):
    """``{"<case>@<dtype>": (op, inputs, outputs, attrs, wrt, cotangent)}`` for
    ``paddle_op_results``; ``cases`` = ``{name: (op, {slot: values}, attrs, wrt)}``."""
    spec = {}
    for name, (op_type, values, attrs, wrt) in cases.items():
        for dtype in DTYPES:
            inputs = _float_inputs(values, dtype)
            dout = cotangent(op_type, inputs, attrs) if wrt else None
            spec[f"{name}@{dtype}"] = (op_type, inputs, (outputs or {}).get(op_type, ["Out"]),
                                       attrs, list(wrt), dout)
    return spec


def paddle_results(tmp_path_factory, cases, outputs=None):
    return paddle_op_results(tmp_path_factory.mktemp("paddle_compare"),
                             paddle_cases(cases, outputs))


def tape_results(op_type, inputs, attrs, wrt, output_slots):
    """Tape's ``{output slot or "d<Slot>": array}`` for the case, as Paddle's are keyed."""
    if wrt:
        outputs, grads = vjp(op_type, inputs, attrs,
                             {"Out": cotangent(op_type, inputs, attrs)})
        got = {"d" + s: g[0] for s, g in grads.items() if s in wrt}
    else:
        outputs, got = run_op(op_type, inputs, attrs), {}
    got.update({s: outputs[s][0].value() for s in output_slots})
    return got


def compare(cases, paddle, name, dtype, bugs, outputs=None):
    """Assert Tape's case ``name`` equals Paddle's; for a case in ``bugs`` (Paddle's bug, keyed
    by name, or by "name@dtype" for one dtype), that it differs, and xfail with the reason."""
    op_type, values, attrs, wrt = cases[name]
    with np.errstate(all="ignore"):
        got = tape_results(op_type, _float_inputs(values, dtype), attrs, wrt,
                           (outputs or {}).get(op_type, ["Out"]))
    want = paddle[f"{name}@{dtype}"]
    assert sorted(got) == sorted(want), name
    problems = []
    for key, value in got.items():
        assert value.dtype == want[key].dtype and value.shape == want[key].shape, \
            f"{name} {key}: {value.dtype}{value.shape}, Paddle's {want[key].dtype}{want[key].shape}"
        try:
            np.testing.assert_allclose(value, want[key], *TOLERANCE[dtype], err_msg=f"{name} {key}")
        except AssertionError as error:
            problems.append(str(error))
    bug = bugs.get(f"{name}@{dtype}", bugs.get(name))
    if bug is not None:
        assert problems, f"{name}@{dtype}: Paddle now agrees with Tape; drop its entry ({bug})"
        pytest.xfail(f"Paddle's bug: {bug}")
    assert not problems, "\n".join(problems)
