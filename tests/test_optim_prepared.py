"""Prepared update ops (optim/update_plans.py): a step after the first calls each parameter's
update kernel without the runner, with the same bits, and every way a step can change (the
learning rate, a setting, loaded state, a parameter's value or shape, a bad gradient, checks,
laziness) is still honoured. Updates are prepared only with the checks off, so these tests
turn off the unused-input check the rest of the suite runs with."""
import numpy as np
import pytest

import tape
from tape import optim
from tape.optim.update_plans import UNPREPARED, PreparedUpdate

SHAPES = [(3, 4), (4,), (70, 64)]   # the last one large enough for sgd's numba loop
STEPS = 4

OPTIMIZERS = {
    "sgd": lambda: optim.SGD(0.1),
    "momentum": lambda: optim.Momentum(0.1, momentum=0.9, use_nesterov=True,
                                       weight_decay=0.01),
    "adam": lambda: optim.Adam(0.01),
    "adam+decay": lambda: optim.Adam(0.01, weight_decay=0.1),
    "adamw": lambda: optim.AdamW(0.01, weight_decay=0.1),
    "adagrad": lambda: optim.Adagrad(0.1),
    "rmsprop": lambda: optim.RMSProp(0.01, centered=True, momentum=0.5),
    "adadelta": lambda: optim.Adadelta(0.5),
    "adamax": lambda: optim.Adamax(0.01),
    "lamb": lambda: optim.Lamb(0.01),
}


@pytest.fixture(autouse=True)
def checks_off(restore_flags):
    tape.set_flags({"FLAGS_enable_unused_var_check": False, "FLAGS_check_nan_inf": False})


def _parameters(dtype=np.float32):
    rng = np.random.default_rng(0)
    return [tape.Variable(rng.standard_normal(shape).astype(dtype), name=f"prep_{i}",
                          stop_gradient=False) for i, shape in enumerate(SHAPES)]


def _gradients(dtype=np.float32, steps=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]


def _step(opt, params, grads):
    for p, g in zip(params, grads):
        p.grad = tape.Variable(g.copy())
    opt(params)


def _train(opt, params, grad_steps, between=None):
    """The parameters' and state's values after each step (``between(step)`` runs first)."""
    history = []
    for step, grads in enumerate(grad_steps):
        if between is not None:
            between(step)
        _step(opt, params, grads)
        assert all(p.grad is None for p in params)
        history.append([p.value().copy() for p in params]
                       + [v for k, v in sorted(opt.state_dict(params).items())
                          if k != "learning_rate"])
    return history


def _assert_same_bits(got, want):
    for step, (a, b) in enumerate(zip(got, want)):
        assert len(a) == len(b)
        for i, (x, y) in enumerate(zip(a, b)):
            assert x.dtype == y.dtype, f"step {step}, array {i}"
            np.testing.assert_array_equal(x, y, err_msg=f"step {step}, array {i}")


def _runner_history(make, grad_steps, between=None, dtype=np.float32):
    """The same training with every update through the runner (``prepare`` switched off)."""
    with pytest.MonkeyPatch.context() as mp:
        from tape.optim import optimizer
        mp.setattr(optimizer, "prepare", lambda *args: UNPREPARED)
        opt = make()
        return _train(opt, _parameters(dtype), grad_steps,
                      None if between is None else lambda step: between(opt, step))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prepared_steps_give_the_runners_bits(name, dtype):
    make, grads = OPTIMIZERS[name], _gradients(dtype)
    opt, params = make(), _parameters(dtype)
    got = _train(opt, params, grads)
    _assert_same_bits(got, _runner_history(make, grads, dtype=dtype))
    prepared = [opt._prepared.get(id(p)) for p in params]
    if name == "adam+decay":    # a gradient made afresh each step by scale and sum ops
        assert all(u is UNPREPARED for u in prepared)
    else:
        assert all(isinstance(u, PreparedUpdate) for u in prepared)


def test_a_prepared_step_runs_no_op_through_the_tape(monkeypatch):
    opt, params, grads = optim.Momentum(0.1, momentum=0.9), _parameters(), _gradients()
    _step(opt, params, grads[0])
    before = [p.value().copy() for p in params]

    def no_op(*args):
        raise AssertionError("an op ran through the tape")

    monkeypatch.setattr(tape.Tape, "run", no_op)
    monkeypatch.setattr(tape.Tape, "add_op", no_op)
    _step(opt, params, grads[1])
    assert all(not np.array_equal(p.value(), b) for p, b in zip(params, before))
    assert all(not p.desc.stop_gradient and p._tape == 0 for p in params)


def _change_rate(opt, step):
    opt.learning_rate = [0.1, 0.05, 0.2, 0.0][step]


def _change_setting(opt, step):
    if step == 2:
        opt.weight_decay = 0.5      # read by Adam's update_op at each step


@pytest.mark.parametrize("name, between", [
    ("sgd", _change_rate), ("momentum", _change_rate), ("adam", _change_rate),
    ("adam", _change_setting)])
def test_changes_between_steps_reach_the_next_update(name, between):
    make, grads = OPTIMIZERS[name], _gradients()
    opt, params = make(), _parameters()
    got = _train(opt, params, grads, lambda step: between(opt, step))
    _assert_same_bits(got, _runner_history(make, grads, between))
    if between is _change_setting:      # the decay changed the updates
        assert not np.array_equal(got[-1][0], _runner_history(make, grads)[-1][0])


def test_sgd_with_a_new_rate_each_step_follows_its_formula_bit_for_bit():
    grads, rates = _gradients(), [0.1, 0.05, 0.2, 0.0]
    opt, params = optim.SGD(1.0), _parameters()
    want = [p.value().copy() for p in params]
    for step, step_grads in enumerate(grads):
        opt.learning_rate = rates[step]
        _step(opt, params, step_grads)
        want = [w - np.float32(rates[step]) * g for w, g in zip(want, step_grads)]
        for p, w in zip(params, want):
            np.testing.assert_array_equal(p.value(), w, err_msg=f"step {step}")


def test_a_scheduler_sets_the_rate_of_prepared_updates():
    grads = _gradients(steps=6)

    def train(params):
        opt = optim.SGD(1.0)
        scheduler = optim.StepDecay(opt, step_size=2, gamma=0.5)
        history = []
        for g in grads:
            _step(opt, params, g)
            scheduler.step()
            history.append(params[0].value().copy())
        return history

    got = train(_parameters())
    with pytest.MonkeyPatch.context() as mp:
        from tape.optim import optimizer
        mp.setattr(optimizer, "prepare", lambda *args: UNPREPARED)
        want = train(_parameters())
    _assert_same_bits([got], [want])


def test_loaded_state_is_what_later_prepared_steps_read():
    grads = _gradients(steps=6)
    opt, params = optim.Momentum(0.1, momentum=0.9), _parameters()
    _train(opt, params, grads[:3])
    state = opt.state_dict(params)
    clones = _parameters()
    for clone, p in zip(clones, params):
        clone.value()[...] = p.value()
    other = optim.Momentum(0.3, momentum=0.9)
    _train(other, clones, grads[:1])    # prepared, with state of its own
    for clone, p in zip(clones, params):
        clone.value()[...] = p.value()
    other.load_state_dict(state, clones)
    _assert_same_bits(_train(other, clones, grads[3:]), _train(opt, params, grads[3:]))


def test_a_parameter_given_a_new_value_or_shape_is_updated_as_it_now_is():
    opt = optim.SGD(0.5)
    p = tape.Variable(np.ones((2, 3), np.float32), stop_gradient=False)
    _step(opt, [p], [np.ones((2, 3), np.float32)])
    p.value()[...] = 4.0                                # in place, as load_state_dict writes
    _step(opt, [p], [np.ones((2, 3), np.float32)])
    np.testing.assert_array_equal(p.value(), np.full((2, 3), 3.5, np.float32))
    # a new array (as an op that writes the Variable leaves it), of a new shape: prepared again
    p._value, p.desc.shape = np.zeros(5, np.float32), (5,)
    p.grad = tape.Variable(np.ones(5, np.float32))
    opt([p])
    np.testing.assert_array_equal(p.value(), np.full(5, -0.5, np.float32))


def test_a_new_parameter_where_a_dropped_one_was_prepared_is_updated_as_itself():
    # the prepared updates are found by id(parameter), which a new Variable may reuse
    opt = optim.SGD(0.5)
    old = tape.Variable(np.ones((2, 3), np.float32), stop_gradient=False)
    _step(opt, [old], [np.ones((2, 3), np.float32)])
    new = tape.Variable(np.full((2, 3), 4.0, np.float32), stop_gradient=False)
    opt._prepared[id(new)] = opt._prepared.pop(id(old))
    _step(opt, [new], [np.ones((2, 3), np.float32)])
    np.testing.assert_array_equal(new.value(), np.full((2, 3), 3.5, np.float32))
    np.testing.assert_array_equal(old.value(), np.full((2, 3), 0.5, np.float32))
    assert opt._prepared[id(new)].param is new


def test_a_bad_gradient_on_a_later_step_is_refused_by_the_shape_rule():
    opt, params, grads = optim.SGD(0.1), _parameters(), _gradients()
    _step(opt, params, grads[0])
    before = params[0].value().copy()
    params[0].grad = tape.Variable(np.ones((4, 3), np.float32))
    with pytest.raises(tape.InvalidArgumentError, match=r"sgd: Grad \(4, 3\) must have the "
                                                        r"shape of Param \(3, 4\)"):
        opt(params[:1])
    np.testing.assert_array_equal(params[0].value(), before)
    params[0].grad = tape.Variable(np.ones((3, 4), np.float64))
    with pytest.raises(tape.InvalidArgumentError, match="sgd: .*Grad.*float64"):
        opt(params[:1])


def test_checks_on_take_the_runner_and_see_a_nan():
    opt, params, grads = optim.SGD(0.1), _parameters(), _gradients()
    _step(opt, params, grads[0])
    bad = grads[1][0].copy()
    bad[0, 0] = np.nan
    tape.set_flags({"FLAGS_check_nan_inf": True})
    with pytest.raises(tape.PreconditionNotMetError, match="sgd"):
        _step(opt, params, [bad, *grads[1][1:]])


def test_lazy_steps_after_prepared_ones_give_the_same_bits():
    grads = _gradients()
    opt, params = optim.Adam(0.01), _parameters()
    got = _train(opt, params, grads[:2])
    with tape.lazy():
        got += _train(opt, params, grads[2:])
    _assert_same_bits(got, _runner_history(OPTIMIZERS["adam"], grads))


def test_a_prepared_update_keeps_no_gradient_alive():
    import gc
    import weakref
    opt, params, grads = optim.SGD(0.1), _parameters(), _gradients()
    gone = []
    for step in range(2):   # the step that prepares the update, and one that runs it
        g = tape.Variable(grads[step][0].copy())
        params[0].grad = g
        opt(params[:1])
        gone.append(weakref.ref(g))
        del g
    gc.collect()
    assert isinstance(opt._prepared[id(params[0])], PreparedUpdate)
    assert [ref() for ref in gone] == [None, None]


def test_an_update_op_of_ones_own_runs_at_every_step_unless_marked_preparable():
    class Halving(optim.Optimizer):
        """SGD whose rate halves at every update, in a new LearningRate Variable each time."""

        def __init__(self, rate):
            super().__init__(rate)
            self.rates = iter(rate / 2 ** k for k in range(100))

        def update_op(self, param, grad):
            rate = tape.Variable(np.array([next(self.rates)], param.dtype))
            return ("sgd", {"Param": [param], "LearningRate": [rate], "Grad": [grad]},
                    {"ParamOut": [param]}, {})

    p = tape.Variable(np.zeros(3, np.float32), stop_gradient=False)
    opt = Halving(1.0)
    for _ in range(3):
        _step(opt, [p], [np.ones(3, np.float32)])
    np.testing.assert_array_equal(p.value(), np.full(3, -1.75, np.float32))
    assert opt._prepared == {}
    assert optim.preparable(Halving.update_op) is Halving.update_op     # marked: prepared
    _step(opt, [p], [np.ones(3, np.float32)])
    assert isinstance(opt._prepared[id(p)], PreparedUpdate)
