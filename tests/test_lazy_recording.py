"""Recording a lazy op (``tape.lazy_runner``): the Variables it makes and the handle it
records are those an eager op makes and records, value apart; a repeated op finds its plan
without working out its signature again."""
import contextlib

import numpy as np
import pytest

import tape
from tape import LazyTape, Tape, Variable, ops, runner
from tape.desc import VarDesc
from tape.tape import using_tape


def _inputs():
    rng = np.random.default_rng(3)
    w = Variable(rng.standard_normal((4, 3)).astype(np.float32), stop_gradient=False)
    c = Variable(rng.standard_normal((4, 3)).astype(np.float32))
    return w, c


# each builds on leaves (w wants a gradient, c does not) and returns the Variables to compare
CASES = {
    "scale by an operator": lambda w, c: [w * 1.5, c * 1.5],
    "a shift, then an op keeping its output": lambda w, c: [ops.tanh(w + 0.25)],
    "elementwise, one input constant": lambda w, c: [ops.elementwise_mul(w, c)],
    "a duplicable output": lambda w, c: list(ops.split(w, num=2, axis=0)),
    "a duplicable input": lambda w, c: [ops.concat([w, c, w], axis=1)],
    "constants only (nothing recorded)": lambda w, c: [ops.exp(c)],
    "a given output": lambda w, c: _given_output(w),
}


def _given_output(w):
    out = Variable(np.zeros((4, 3), np.float32))
    tape.get_global_tape().add_op("scale", {"X": [w]}, {"Out": [out]}, {"scale": 3.0})
    return [out]


def _describe(entry, known: dict):
    """What a handle's entry is: a Variable or a VarDesc, named by its place among the
    Variables of the run (``known``: id -> label)."""
    kind = "Variable" if type(entry) is Variable else "VarDesc"
    desc = entry.desc if type(entry) is Variable else entry
    assert type(desc) is VarDesc
    return kind, known.get(id(desc), "other"), desc.shape, desc.dtype, desc.stop_gradient


def _run(make, lazy: bool, tracing: bool, grad: bool):
    """``(outputs described, handles described, output values)`` of ``make`` run on a fresh
    tape of the mode."""
    w, c = _inputs()
    t = (LazyTape if lazy else Tape)(tracing=tracing)
    with using_tape(t):
        if lazy:
            with tape.lazy():
                outs = _made(make, w, c, grad)
        else:
            outs = _made(make, w, c, grad)
    known = {id(w.desc): "w", id(c.desc): "c"}
    known.update((id(v.desc), f"out{i}") for i, v in enumerate(outs))
    described = []
    for v in outs:
        d = v.desc
        assert v.grad is None
        described.append((d.shape, d.dtype, d.stop_gradient, d.persistable, d.type,
                          d.need_check_feed, v._tape == t.serial, v._tape == 0, v.place))
    handles = [(h.plan.info.type,
                {slot: [_describe(e, known) for e in es] for slot, es in h.inputs.items()},
                {slot: [_describe(e, known) for e in es] for slot, es in h.outputs.items()})
               for h in t]
    if lazy:
        assert all(v.pending for v in outs) or not outs
        tape.compute(*outs)
    return described, handles, [v.numpy() for v in outs]


def _made(make, w, c, grad: bool):
    if grad:
        return make(w, c)
    with tape.no_grad():
        return make(w, c)


@pytest.mark.parametrize("tracing", [False, True], ids=["backward", "tracing"])
@pytest.mark.parametrize("grad", [True, False], ids=["recorded", "no_grad"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_lazy_op_makes_and_records_what_an_eager_one_does(case, grad, tracing):
    eager = _run(CASES[case], False, tracing, grad)
    lazy = _run(CASES[case], True, tracing, grad)
    assert lazy[0] == eager[0]      # the output Variables
    assert lazy[1] == eager[1]      # the recorded handles
    for got, expected in zip(lazy[2], eager[2], strict=True):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_a_repeated_operator_finds_its_plan_without_its_signature(monkeypatch, lazy):
    """``x * 1.5`` is scale with bias 0.0, whose plan is keyed by its exact signature (a zero
    among the attributes): the operator hands it to the runner, which then finds the plan
    directly, in both modes."""
    x = Variable(np.ones(8, np.float32), stop_gradient=False)
    calls = []
    signature = runner.signature

    def counted(attrs):
        calls.append(dict(attrs))
        return signature(attrs)

    def chain():
        tape.reset_global_tape()
        y = x
        for _ in range(20):
            y = y * 1.5
        return y

    with tape.lazy() if lazy else contextlib.nullcontext():
        chain()     # (the first call makes the plan)
        monkeypatch.setattr(runner, "signature", counted)
        y = chain()
        assert y.pending is lazy
    assert calls == []
    np.testing.assert_array_equal(y.numpy(), np.full(8, 1.5 ** 20, np.float32))

