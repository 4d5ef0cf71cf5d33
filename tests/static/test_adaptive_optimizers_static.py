"""Adamax in a static program: its beta1_pow advances by a scale op after its update, as in
Paddle. (Every optimizer's static training is checked step for step against the eager loop in
test_static_backward.py.)"""
import numpy as np
from test_static_backward import _batch, _classifier

import tape.static as static
from tape import optim


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
