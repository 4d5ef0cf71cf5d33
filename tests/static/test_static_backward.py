"""Static backward, optimizer ops and a checkpoint on one program: the seed's three cases."""
import numpy as np
import pytest

import tape
import tape.static as static
from tape import layers, optim, params
from tape.desc import OpDesc
from tape.optim.adam import Adam
from tape.optim.clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from tape.optim.lr_scheduler import LinearWarmup, StepDecay
from tape.optim.momentum import Momentum
from tape.optim.sgd import SGD
from tape.registry import REGISTRY, GradMaker, GradOp, grad_name, kernel, register_op
from tape.static.program import append_checkpoint

RNG = np.random.default_rng(0)


def _batch(n=6):
    return RNG.standard_normal((n, 4)), RNG.integers(0, 3, (n, 1))


def _classifier():
    tape.seed(3)
    l1, l2 = layers.Linear(4, 8, act="tanh", dtype="float64"), layers.Linear(8, 3,
                                                                            dtype="float64")

    def loss_fn(x, y):
        return tape.ops.mean(tape.ops.softmax_with_cross_entropy(l2(l1(x)), y)[1])
    return l1.params() + l2.params(), loss_fn


def _grads(program, loss, feed):
    """Gradient arrays of every parameter after append_backward, by running the program."""
    pairs = static.append_backward(program, loss)
    values = static.Executor().run(program, feed, [g for _, g in pairs])
    return dict(zip((p for p, _ in pairs), values))


def _eager_grads(params, loss_fn, *inputs):
    loss_fn(*map(tape.Variable, inputs)).backward()
    return {p.name: p.grad.value() for p in params}


def _assert_same(static_values: dict, eager_values: dict):
    assert static_values.keys() == eager_values.keys()
    for name, value in eager_values.items():
        np.testing.assert_allclose(static_values[name], value, rtol=1e-12, err_msg=name)


def test_gradients_match_the_eager_tape():
    params_, loss_fn = _classifier()
    x, y = _batch()
    program = static.trace(loss_fn, x, y)
    static_grads = _grads(program, program.fetch_names[0], {"input_0": x, "input_1": y})
    _assert_same(static_grads, _eager_grads(params_, loss_fn, x, y))
    types = [op.type for op in program.global_block().ops]
    assert "softmax_with_cross_entropy_grad" in types and types.count("mul_grad") == 2
    assert "input_0@GRAD" not in program.global_block().vars   # fed data wants no gradient


def test_a_variable_used_twice_gets_renamed_partial_gradients_and_a_sum():
    w = tape.Variable(RNG.standard_normal((2, 3)), name="w", stop_gradient=False)
    w.desc.persistable = True

    def loss_fn(x):
        return tape.ops.mean(tape.ops.relu(x * w) + tape.ops.tanh(w) * w)
    x = RNG.standard_normal((2, 3))
    program = static.trace(loss_fn, x)
    static_grads = _grads(program, program.fetch_names[0], {"input_0": x})
    _assert_same(static_grads, _eager_grads([w], loss_fn, x))
    block = program.global_block()
    (total,) = [op for op in block.ops if op.type == "sum"]
    assert total.output("Out") == ["w@GRAD"]
    assert sorted(total.input("X")) == [f"w@GRAD@RENAME@{k}" for k in range(3)]
    assert all(block.vars[n].shape == (2, 3) for n in total.input("X"))


@pytest.fixture
def temporary_ops():
    """Register ops for one test only (the generic op test must not see them)."""
    added = []

    def register(type, **kw):
        register_op(type, **kw)
        added.extend([type, type + "_grad"])
    yield register
    for t in added:
        REGISTRY.pop(t, None)


def _register_two_heads(register, optional: bool):
    """A = 2 X, B = 3 X; the gradient needs B@GRAD always, or only when one arrived."""
    type = "two_heads_optional_test" if optional else "two_heads_test"
    grad = GradOp(out_grads=["A"], optional_out_grads=["B"]) if optional else GradOp()
    register(type, inputs=["X"], outputs=["A", "B"], grad=grad,
             infer_shape=lambda ctx: [ctx.set_output(s, ctx.input("X").shape,
                                                     ctx.input("X").dtype) for s in "AB"])
    kernel(type)(lambda X: (2 * X, 3 * X))

    def two_heads_grad(dA, dB):
        return 2 * dA + (0 if dB is None else 3 * dB)
    kernel(type + "_grad")(two_heads_grad)
    return type


@pytest.mark.parametrize("optional", [False, True])
def test_an_output_gradient_that_never_arrives(temporary_ops, optional):
    type = _register_two_heads(temporary_ops, optional)
    w = tape.Variable(RNG.standard_normal(3), name="w", stop_gradient=False)
    w.desc.persistable = True

    def loss_fn(x):
        out = tape.get_global_tape().add_op(type, {"X": [x * w]})
        return tape.ops.mean(out["A"][0])
    x = RNG.standard_normal(3)
    program = static.trace(loss_fn, x)
    static_grads = _grads(program, program.fetch_names[0], {"input_0": x})
    _assert_same(static_grads, _eager_grads([w], loss_fn, x))
    ops = program.global_block().ops
    (grad_op,) = [op for op in ops if op.type == type + "_grad"]
    if optional:      # a dispensable slot: simply left out
        assert "B@GRAD" not in grad_op.inputs and "fill_zeros_like" not in [o.type for o in ops]
    else:
        (zeros,) = [op for op in ops if op.type == "fill_zeros_like"]
        assert zeros.output("Out") == grad_op.input("B@GRAD")


_SCALE = {"bias": 0.0, "bias_after_scale": True}


class _TwoStepGrad(GradMaker):
    """X@GRAD = 3 * (2 * Out@GRAD), through a temporary."""

    grads = ("X",)

    def make(self, op):
        dout, dx = grad_name(op.outputs["Out"][0]), grad_name(op.inputs["X"][0])
        return [OpDesc("scale", {"X": [dout]}, {"Out": ["half_way"]}, {**_SCALE, "scale": 2.0}),
                OpDesc("scale", {"X": ["half_way"]}, {"Out": [dx]}, {**_SCALE, "scale": 3.0})]


def test_a_grad_maker_with_several_ops_and_a_temporary(temporary_ops):
    temporary_ops("times_six_test", inputs=["X"], outputs=["Out"], grad=_TwoStepGrad(),
                  infer_shape=lambda ctx: ctx.set_output("Out", ctx.input("X").shape,
                                                         ctx.input("X").dtype))
    kernel("times_six_test")(lambda X: 6 * X)
    w = tape.Variable(RNG.standard_normal(3), name="w", stop_gradient=False)
    w.desc.persistable = True

    def six(v):
        return tape.get_global_tape().add_op("times_six_test", {"X": [v]})["Out"][0]

    def loss_fn(x):
        return tape.ops.mean(six(tape.ops.tanh(six(x * w))))
    x = RNG.standard_normal(3)
    program = static.trace(loss_fn, x)
    static_grads = _grads(program, program.fetch_names[0], {"input_0": x})
    _assert_same(static_grads, _eager_grads([w], loss_fn, x))
    block = program.global_block()
    temps = [op.output("Out")[0] for op in block.ops if op.attrs.get("scale") == 2.0]
    assert len(set(temps)) == 2 and all(block.vars[t].shape == (3,) for t in temps)


def test_backward_needs_a_loss_of_known_shape():
    program = static.trace(lambda x: tape.ops.relu(x), np.ones((2, 3)))
    before = str(program)
    with pytest.raises(tape.InvalidArgumentError, match=r"shape \(-1, 3\), with unknown dims"):
        static.append_backward(program, program.fetch_names[0])
    assert str(program) == before
    with pytest.raises(tape.NotFoundError, match="no op of the program computes the loss"):
        static.append_backward(program, "input_0")


def test_appending_backward_twice_changes_nothing():
    params_, loss_fn = _classifier()
    program = static.trace(loss_fn, *_batch())
    first = static.append_backward(program, program.fetch_names[0])
    ops = len(program.global_block().ops)
    assert static.append_backward(program, program.fetch_names[0]) == first
    assert len(program.global_block().ops) == ops
    assert [p for p, _ in first] == [p.name for p in params_]


def test_one_program_runs_inference_training_or_checkpointing_by_target(tmp_path):
    params_, loss_fn = _classifier()
    program = static.trace(loss_fn, *_batch())
    (cost,) = program.fetch_names
    opt = SGD(0.1).minimize(cost, program)
    checkpoint = append_checkpoint(program, str(tmp_path / "checkpoint.pdiparams"))
    x, y = _batch()
    feed = {"input_0": x, "input_1": y}
    exe, scope = static.Executor(), program.scope
    forward = {"feed", "mul", "elementwise_add", "tanh", "softmax_with_cross_entropy", "mean",
               "fetch"}
    before = {p.name: scope.find_var(p.name).value.copy() for p in params_}

    (loss,) = exe.run(program, feed, [cost], targets=[cost])
    assert set(exe.last_run_ops) == forward
    np.testing.assert_allclose(loss, loss_fn(tape.Variable(x), tape.Variable(y)).value())
    _assert_same({n: scope.find_var(n).value for n in before}, before)

    exe.run(program, feed, [cost], targets=[cost, opt])
    assert set(exe.last_run_ops) == forward | {
        "fill_constant", "mean_grad", "softmax_with_cross_entropy_grad", "mul_grad",
        "elementwise_add_grad", "tanh_grad", "sgd"}
    assert exe.last_run_ops.count("sgd") == len(params_)
    assert all(not np.array_equal(scope.find_var(n).value, v) for n, v in before.items())

    assert not (tmp_path / "checkpoint.pdiparams").exists()
    exe.run(program, targets=[checkpoint])
    assert exe.last_run_ops == ["save_combine"]
    names = sorted(checkpoint.input("X"))
    assert checkpoint.input("X") == names and set(before) < set(names)   # + the learning rate
    saved = params.load_combined(str(tmp_path / "checkpoint.pdiparams"))
    _assert_same(dict(zip(names, saved)), {n: scope.find_var(n).value for n in names})


@pytest.mark.parametrize("make_optimizer", [
    lambda: SGD(0.1),
    lambda: Momentum(0.1, momentum=0.9, use_nesterov=True, weight_decay=0.01),
    lambda: Adam(0.05, weight_decay=0.01),
    lambda: SGD(0.1, grad_clip=ClipGradByGlobalNorm(0.5)),
    lambda: Momentum(0.1, weight_decay=0.01, grad_clip=ClipGradByNorm(0.3)),
    lambda: Adam(0.05, weight_decay=0.01, grad_clip=ClipGradByValue(0.1)),
    lambda: optim.Adagrad(0.1),
    lambda: optim.RMSProp(0.01, momentum=0.5, centered=True),
    lambda: optim.Adadelta(1.0),
    lambda: optim.Adamax(0.05),
    lambda: optim.Lamb(0.05),
], ids=["sgd", "momentum", "adam", "sgd-global-norm", "momentum-norm", "adam-value", "adagrad",
        "rmsprop-centered", "adadelta", "adamax", "lamb"])
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


@pytest.mark.parametrize("clip, clip_ops", [
    (ClipGradByGlobalNorm(0.5), ["squared_l2_norm"] * 4 + [
        "sum", "sqrt", "fill_constant", "elementwise_max", "elementwise_div"] +
     ["elementwise_mul"] * 4),
    (ClipGradByNorm(0.3), ["clip_by_norm"] * 4),
    (ClipGradByValue(0.1), ["clip"] * 4)], ids=["global-norm", "norm", "value"])
def test_minimize_records_the_clip_ops_with_role_optimize_before_the_updates(clip, clip_ops):
    params_, loss_fn = _classifier()
    program = static.trace(loss_fn, *_batch())
    block = program.global_block()
    n_ops = len(block.ops)
    targets = SGD(0.1, grad_clip=clip).minimize(program.fetch_names[0], program)
    assert block.ops[-len(targets):] == targets      # the clip ops, then the updates
    assert [op.type for op in targets] == clip_ops + ["sgd"] * len(params_)
    assert all(op.attrs["op_role"] == 2 for op in targets)
    assert not any(op.attrs["op_role"] == 2 for op in block.ops[n_ops:-len(targets)])
    clipped = [op.output("Out")[0] for op in targets[len(clip_ops) - len(params_):len(clip_ops)]]
    assert [op.input("Grad")[0] for op in targets[len(clip_ops):]] == clipped
    assert not any(block.vars[name].persistable for name in clipped)


def test_minimize_makes_optimizer_state_persistable_in_the_scope():
    params_, loss_fn = _classifier()
    program = static.trace(loss_fn, *_batch())
    updates = Momentum(0.1).minimize(program.fetch_names[0], program)
    block = program.global_block()
    assert [op.type for op in updates] == ["momentum"] * len(params_)
    assert all(op in block.ops and op.attrs["op_role"] == 2 for op in updates)
    for op in updates:
        velocity = op.input("Velocity")[0]
        assert block.vars[velocity].persistable and op.output("VelocityOut") == [velocity]
        np.testing.assert_array_equal(program.scope.find_var(velocity).value, 0)


@pytest.mark.parametrize("make_scheduler", [
    lambda opt: StepDecay(opt, step_size=2, gamma=0.5),
    lambda opt: LinearWarmup(opt, warmup_steps=3, start_lr=0.0, end_lr=0.1),
], ids=["step-decay", "warmup"])
def test_a_scheduler_drives_the_learning_rate_of_a_minimized_program(make_scheduler):
    params_, loss_fn = _classifier()
    program = static.trace(loss_fn, *_batch())
    (cost,) = program.fetch_names
    static_optimizer, eager_optimizer = Adam(0.1), Adam(0.1)
    updates = static_optimizer.minimize(cost, program)
    schedulers = [make_scheduler(static_optimizer), make_scheduler(eager_optimizer)]
    exe, rates = static.Executor(), []
    for _ in range(5):
        x, y = _batch()
        exe.run(program, {"input_0": x, "input_1": y}, targets=updates)
        tape.reset_global_tape()
        loss_fn(tape.Variable(x), tape.Variable(y)).backward()
        eager_optimizer(params_)
        _assert_same({p.name: program.scope.find_var(p.name).value for p in params_},
                     {p.name: p.value() for p in params_})
        rates.append(static_optimizer.learning_rate)
        for scheduler in schedulers:
            scheduler.step()
    assert len(set(rates)) > 1       # the rate did change along the way
