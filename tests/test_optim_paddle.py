"""Adagrad, RMSProp, Adadelta, Adamax and Lamb against a live Paddle: each op on its registered
cases, and each optimizer over several steps against Paddle's optimizer of the same name."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from paddle_ops import needs_paddle, paddle_op_results

import tape
from tape import optim
from tape.registry import REGISTRY
from tape.testing import Draw, run_op

OPS = ["adagrad", "rmsprop", "adadelta", "adamax", "lamb"]
SEEDS = range(12)
STEPS = 5
SHAPES = [(3, 4), (5,)]


def _cases():
    """``{name: (op type, inputs, attrs)}`` of the ops' registered cases, float64, without a
    MasterParam (Paddle keeps one only for float16 parameters). Not rmsprop's: Paddle's CPU
    kernel requires ParamOut to be Param itself, which a one-op program cannot feed (its
    optimizer is compared below). Not those with SkipUpdate true: Paddle then leaves the
    outputs unwritten (they are the inputs themselves in a real program)."""
    cases = {}
    for op_type in OPS:
        if op_type == "rmsprop":
            continue
        for seed in SEEDS:
            inputs, attrs = REGISTRY[op_type].case(Draw.from_seed(seed))
            if "MasterParam" in inputs or inputs.get("SkipUpdate", [False])[0]:
                continue
            inputs = {k: v.astype(np.float64) if v.dtype.kind == "f" else v
                      for k, v in inputs.items()}
            # Paddle's FLOAT attributes are float32: give both sides the same values
            attrs = {k: float(np.float32(v)) if isinstance(v, float) else v
                     for k, v in attrs.items()}
            cases[f"{op_type}_{seed}"] = op_type, inputs, attrs
    return cases


@needs_paddle
def test_ops_match_paddle(tmp_path):
    cases, ours = _cases(), {}
    spec = {}
    for name, (op_type, inputs, attrs) in cases.items():
        full = REGISTRY[op_type].check_attrs(attrs)
        outputs = run_op(op_type, {k: v.copy() for k, v in inputs.items()}, attrs)
        ours[name] = {slot: vs[0].value() for slot, vs in outputs.items()
                      if vs and vs[0] is not None}
        spec[name] = (op_type, inputs, list(ours[name]), full, [], None)
    theirs = paddle_op_results(tmp_path, spec)
    for name in cases:
        for slot, value in ours[name].items():
            np.testing.assert_allclose(value, theirs[name][slot], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{name}: {slot}")


_SCRIPT = """
    import json, sys, numpy as np, paddle
    spec, data = json.load(open(sys.argv[1])), np.load(sys.argv[2])
    results = {}
    for name, (cls, kwargs) in spec.items():
        params = [paddle.create_parameter(list(p.shape), "float64",
                  default_initializer=paddle.nn.initializer.Assign(p))
                  for p in (data[f"p{i}"] for i in range(2))]
        opt = getattr(paddle.optimizer, cls)(parameters=params, **kwargs)
        for step in range(int(data["steps"])):
            loss = sum((p * paddle.to_tensor(data[f"g{step}_{i}"])).sum()
                       for i, p in enumerate(params))
            loss.backward()
            opt.step()
            opt.clear_grad()
            for i, p in enumerate(params):
                results[f"{name}/{step}_{i}"] = p.numpy()
    np.savez(sys.argv[3], **results)
"""

CONFIGS = {   # name: (Tape optimizer, Paddle class, keyword arguments common to both); rates
    # and decays exact in float32, the type of Paddle's FLOAT attributes and learning rate
    "adagrad": (optim.Adagrad, "Adagrad", {"learning_rate": 0.125}),
    "adagrad_init": (optim.Adagrad, "Adagrad", {"learning_rate": 0.125,
                                                "initial_accumulator_value": 0.5}),
    "rmsprop": (optim.RMSProp, "RMSProp", {"learning_rate": 2 ** -7, "rho": 0.875}),
    "rmsprop_centered": (optim.RMSProp, "RMSProp", {"learning_rate": 2 ** -7, "rho": 0.875,
                                                    "momentum": 0.75, "centered": True}),
    "adadelta": (optim.Adadelta, "Adadelta", {"learning_rate": 1.0, "rho": 0.875}),
    "adamax": (optim.Adamax, "Adamax", {"learning_rate": 2 ** -6, "beta1": 0.75,
                                        "beta2": 1 - 2 ** -7}),
    **{name: (optim.Lamb, "Lamb", {"learning_rate": 2 ** -7, "lamb_weight_decay": decay,
                                   "beta1": 0.875, "beta2": 1 - 2 ** -7})
       for name, decay in (("lamb", 2 ** -7), ("lamb_no_decay", 0.0))},
}


def _data():
    rng = np.random.default_rng(0)
    data = {f"p{i}": rng.standard_normal(s) for i, s in enumerate(SHAPES)}
    data.update({f"g{t}_{i}": rng.standard_normal(s) for t in range(STEPS)
                 for i, s in enumerate(SHAPES)})
    return {**data, "steps": np.array(STEPS)}


def _tape_history(make, kwargs, data):
    params = []
    for i in range(len(SHAPES)):
        p = tape.Variable(data[f"p{i}"].copy(), name=f"p{i}", stop_gradient=False)
        p.desc.persistable = True
        params.append(p)
    opt, history = make(**kwargs), {}
    for step in range(STEPS):
        for i, p in enumerate(params):
            p.grad = tape.Variable(data[f"g{step}_{i}"].copy())
        opt(params)
        history.update({f"{step}_{i}": p.value().copy() for i, p in enumerate(params)})
    return history


@needs_paddle
def test_optimizers_match_paddles_over_several_steps(tmp_path):
    data = _data()
    (tmp_path / "spec.json").write_text(json.dumps(
        {name: (cls, kwargs) for name, (_, cls, kwargs) in CONFIGS.items()}))
    np.savez(tmp_path / "in.npz", **data)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), tmp_path / "spec.json",
                           tmp_path / "in.npz", tmp_path / "out.npz"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "GLOG_minloglevel": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = np.load(tmp_path / "out.npz")
    for name, (make, _, kwargs) in CONFIGS.items():
        for key, value in _tape_history(make, kwargs, data).items():
            np.testing.assert_allclose(value, theirs[f"{name}/{key}"], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name}, step_param {key}")


@pytest.mark.parametrize("make", [c[0] for c in CONFIGS.values()][::2] + [optim.Lamb])
def test_state_dict_round_trip(make):
    data = _data()
    first = _tape_history(make, {"learning_rate": 0.01}, data)
    assert len(first) == STEPS * len(SHAPES)
    params = [tape.Variable(data["p0"].copy(), name="q", stop_gradient=False)]
    params[0].desc.persistable = True
    opt = make(learning_rate=0.01)
    params[0].grad = tape.Variable(data["g0_0"].copy())
    opt(params)
    other = make(learning_rate=0.5)
    other.load_state_dict(opt.state_dict(params), params)
    assert other.learning_rate == 0.01
    assert set(other.state_dict(params)) == set(opt.state_dict(params))
