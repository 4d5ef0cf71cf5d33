"""Inference semantics in static programs, as Paddle's: save_inference_model and
``Program.clone(for_test=True)`` set ``is_test``, so a model traced in training mode is
exported and evaluated with dropout off and batch norm on its running statistics."""
import numpy as np
from paddle_runner import needs_paddle, paddle_predict

import tape
import tape.static as static
from tape import layers
from tape.optim import SGD

RNG = np.random.default_rng(5)
X = RNG.standard_normal((8, 4)).astype(np.float32)
Y = RNG.integers(0, 3, (8, 1))


def _model():
    """Linear -> BatchNorm -> relu -> Dropout -> Linear, trained a few eager steps so that the
    running statistics have moved; left in training mode."""
    tape.seed(4)
    model = layers.Sequential(layers.Linear(4, 6), layers.BatchNorm(6, act="relu"),
                              layers.Dropout(0.5), layers.Linear(6, 3))
    sgd = SGD(0.1)
    for _ in range(3):
        tape.reset_global_tape()
        loss = _loss(model, tape.Variable(X), tape.Variable(Y))
        loss.backward()
        sgd(model.params())
    return model


def _loss(model, x, y):
    return tape.ops.mean(tape.ops.softmax_with_cross_entropy(model(x), y)[1])


def _eval_output(model, x):
    model.eval()
    try:
        with tape.no_grad():
            return model(tape.Variable(x)).numpy()
    finally:
        model.train()


def _is_test(program_desc):
    return {op.type: op.attrs["is_test"] for op in program_desc.global_block().ops
            if op.type in ("batch_norm", "dropout")}


def test_an_exported_training_mode_trace_infers_like_eval_mode(tmp_path):
    model = _model()
    program = static.trace(model, X)
    assert _is_test(program.desc) == {"batch_norm": False, "dropout": False}
    static.save_inference_model(tmp_path, program)
    loaded = static.load_inference_model(tmp_path)
    assert _is_test(loaded.desc) == {"batch_norm": True, "dropout": True}
    assert _is_test(program.desc) == {"batch_norm": False, "dropout": False}   # unchanged
    (out,) = static.Executor().run(loaded, {loaded.feed_names[0]: X}, loaded.fetch_names)
    np.testing.assert_allclose(out, _eval_output(model, X), rtol=1e-5, atol=1e-6)


@needs_paddle
def test_paddle_serves_the_export_in_inference_mode(tmp_path):
    model = _model()
    static.save_inference_model(tmp_path, static.trace(model, X))
    np.testing.assert_allclose(paddle_predict(tmp_path, X), _eval_output(model, X), rtol=1e-5,
                               atol=1e-5)


def test_clone_for_test_drops_training_and_evaluates_on_the_shared_parameters():
    model = _model()
    program = static.trace(lambda x, y: _loss(model, x, y), X, Y)
    updates = SGD(0.1).minimize(program.fetch_names[0], program)
    test_program = program.clone(for_test=True)
    types = [op.type for op in test_program.global_block().ops]
    assert not [t for t in types if t.endswith("_grad") or t in ("sgd", "fill_constant")]
    assert _is_test(test_program.desc) == {"batch_norm": True, "dropout": True}
    assert not any(n.endswith("@GRAD") for n in test_program.global_block().vars)
    assert test_program.scope is program.scope
    assert program.clone().global_block().ops[-1].type == "sgd"      # plain clone: all of it

    exe, feed = static.Executor(), {"input_0": X, "input_1": Y}
    for _ in range(2):
        exe.run(program, feed, targets=updates)
    (loss,) = exe.run(test_program, feed, test_program.fetch_names)
    for layer_values in model.state_dict(keep_vars=True).values():     # the trained values
        layer_values.value()[...] = program.scope.find_var(layer_values.name).value
    model.eval()
    with tape.no_grad():
        expected = _loss(model, tape.Variable(X), tape.Variable(Y)).numpy()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
