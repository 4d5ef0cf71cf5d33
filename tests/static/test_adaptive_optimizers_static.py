"""Adagrad, RMSProp, Adadelta, Adamax and Lamb in static programs (minimize) step for step with
the eager loop; Adamax's beta1_pow advances by a scale op after its update, as in Paddle."""
import numpy as np
import pytest
from test_static_backward import _assert_same, _batch, _classifier

import tape
import tape.static as static
from tape import optim

OPTIMIZERS = {
    "adagrad": lambda: optim.Adagrad(0.1),
    "rmsprop-centered": lambda: optim.RMSProp(0.01, momentum=0.5, centered=True),
    "adadelta": lambda: optim.Adadelta(1.0),
    "adamax": lambda: optim.Adamax(0.05),
    "lamb": lambda: optim.Lamb(0.05),
}


@pytest.mark.parametrize("make_optimizer", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_static_training_matches_the_eager_loop_step_for_step(make_optimizer):
    params_, loss_fn = _classifier()
    program = static.trace(loss_fn, *_batch())
    (cost,) = program.fetch_names
    updates = make_optimizer().minimize(cost, program)
    eager_optimizer, exe = make_optimizer(), static.Executor()
    for _ in range(4):
        x, y = _batch()
        (static_loss,) = exe.run(program, {"input_0": x, "input_1": y}, [cost],
                                 targets=updates)
        tape.reset_global_tape()
        loss = loss_fn(tape.Variable(x), tape.Variable(y))
        loss.backward()
        eager_optimizer(params_)
        np.testing.assert_allclose(static_loss, loss.value(), rtol=1e-12)
        _assert_same({p.name: program.scope.find_var(p.name).value for p in params_},
                     {p.name: p.value() for p in params_})


def test_adamax_scales_its_beta1_pow_after_each_update():
    params_, loss_fn = _classifier()
    program = static.trace(loss_fn, *_batch())
    updates = optim.Adamax(0.05, beta1=0.5).minimize(program.fetch_names[0], program)
    assert [op.type for op in updates] == ["adamax"] * len(params_) + ["scale"] * len(params_)
    for update, scale in zip(updates, updates[len(params_):]):
        assert scale.input("X") == scale.output("Out") == update.input("Beta1Pow")
    exe = static.Executor()
    for _ in range(3):
        exe.run(program, dict(zip(["input_0", "input_1"], _batch())), [], targets=updates)
    power = program.scope.find_var(updates[0].input("Beta1Pow")[0]).value
    np.testing.assert_allclose(power, [0.5 ** 4])
