"""layers.Linear / Mean / Fill and optim.SGD: what they compute and which ops they run."""
import math
import re

import numpy as np
import pytest

import tape
from tape import layers, optim


@pytest.fixture
def added_ops(monkeypatch):
    """The op types added through Tape.add_op (any tape) while the test runs."""
    seen = []
    add_op = tape.Tape.add_op

    def spy(self, type, inputs, outputs=None, attrs=None):
        seen.append(type)
        return add_op(self, type, inputs, outputs, attrs)

    monkeypatch.setattr(tape.Tape, "add_op", spy)
    return seen


def _relu(a):
    return np.maximum(a, 0)


@pytest.mark.parametrize("act, fn", [(None, lambda a: a), ("relu", _relu), ("tanh", np.tanh)])
@pytest.mark.parametrize("x_shape", [(5, 3), (2, 4, 3)])
def test_linear_forward_is_x_at_w_plus_b_then_act(act, fn, x_shape):
    layer = layers.Linear(3, 4, act=act, dtype="float64")
    layer.b.value()[...] = np.arange(4.0) - 1.5
    x = np.random.default_rng(0).standard_normal(x_shape)
    y = layer(tape.Variable(x))
    assert y.shape == x_shape[:-1] + (4,)
    np.testing.assert_allclose(y.value(), fn(x @ layer.w.value() + layer.b.value()), rtol=1e-12)


@pytest.mark.parametrize("x_shape", [(2, 5, 3), (5, 3)])
def test_linear_emits_paddle_fc_ops(x_shape):
    # (a matrix's mul is called without attributes: the defaults fill them in)
    layer = layers.Linear(3, 2, act="relu")
    layer(tape.Variable(np.ones(x_shape, np.float32)))
    ops = list(tape.get_global_tape())
    assert [op.type for op in ops] == ["mul", "elementwise_add", "relu"]
    rank = len(x_shape)
    assert ops[0].attrs["x_num_col_dims"] == rank - 1 and ops[0].attrs["y_num_col_dims"] == 1
    assert ops[1].attrs["axis"] == rank - 1


def test_linear_parameters_are_named_paddle_style_and_unique():
    first, second = layers.Linear(2, 3), layers.Linear(2, 3)
    names = [p.name for layer in (first, second) for p in layer.params()]
    assert len(set(names)) == 4
    for layer in (first, second):
        w, b = layer.params()
        prefix = re.fullmatch(r"(linear_\d+)\.w_0", w.name).group(1)
        assert b.name == f"{prefix}.b_0"
        assert w.desc.persistable and b.desc.persistable
        assert not w.stop_gradient and not b.stop_gradient


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_initialisers(dtype):
    layer = layers.Linear(200, 300, dtype=dtype)
    w, b = layer.w.value(), layer.b.value()
    assert w.shape == (200, 300) and b.shape == (300,)
    assert w.dtype == b.dtype == np.dtype(dtype)
    limit = math.sqrt(6 / 500)
    assert np.all(np.abs(w) <= limit)
    assert abs(w.mean()) < 0.01 * limit and abs(w.std() - limit / math.sqrt(3)) < 0.02 * limit
    assert np.all(b == 0)
    assert not np.array_equal(w, layers.Linear(200, 300, dtype=dtype).w.value())


def test_linear_initialises_through_ops_on_a_throwaway_tape(added_ops):
    layers.Linear(2, 3)
    assert added_ops == ["uniform_random", "fill_constant"]
    assert len(tape.get_global_tape()) == 0


@pytest.mark.parametrize("act", ["no_such_op", "mul", "relu_grad"])
def test_linear_rejects_an_act_that_is_not_a_unary_op(act):
    with pytest.raises(tape.InvalidArgumentError, match=f"act='{act}'"):
        layers.Linear(2, 3, act=act)


def test_linear_rejects_a_mismatched_input():
    layer = layers.Linear(3, 2)
    for shape in [(4, 5), (3,)]:
        with pytest.raises(tape.InvalidArgumentError, match=r"Linear: expected x of shape"):
            layer(tape.Variable(np.ones(shape, np.float32)))
    with pytest.raises(tape.InvalidArgumentError, match="floating"):
        layers.Linear(3, 2, dtype="int64")


def test_mean_averages_every_element():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(layers.Mean()(tape.Variable(x)).value(), 2.5)


def test_fill_writes_a_copy_through_an_assign_op(added_ops):
    x = tape.Variable(name="input")
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert layers.Fill()(x, data) is x
    assert added_ops == ["assign"]
    assert x.name == "input" and x.shape == (2, 3) and x.dtype == np.float32
    np.testing.assert_array_equal(x.value(), data)
    data[0, 0] = 100.0
    assert x.value()[0, 0] == 0.0
    layers.Fill()(x, [[1.0], [2.0]])
    assert x.shape == (2, 1) and x.dtype == np.float32


def _with_grads(layer, x):
    """The gradients of mean(layer(x)) alone (earlier ones cleared), left in .grad too."""
    for p in layer.params():
        p.grad = None
    tape.reset_global_tape()
    layers.Mean()(layer(tape.Variable(x))).backward()
    return [p.grad.value().copy() for p in layer.params()]


def test_sgd_updates_p_minus_lr_g_in_place_and_clears_grads(added_ops):
    layer = layers.Linear(3, 2, dtype="float64")
    grads = _with_grads(layer, np.random.default_rng(1).standard_normal((4, 3)))
    before = [p.value().copy() for p in layer.params()]
    arrays = [p.value() for p in layer.params()]
    added_ops.clear()
    optim.SGD(learning_rate=0.25)(layer.params())
    assert added_ops == ["sgd", "sgd"]
    for p, array, old, g in zip(layer.params(), arrays, before, grads):
        assert p.value() is array
        np.testing.assert_allclose(p.value(), old - 0.25 * g, rtol=1e-14)
        assert p.grad is None and not p.stop_gradient


def test_sgd_skips_params_without_a_gradient(added_ops):
    layer = layers.Linear(3, 2)
    spare = layers.Linear(3, 2)
    _with_grads(layer, np.ones((2, 3), np.float32))
    untouched = [p.value().copy() for p in spare.params()]
    added_ops.clear()
    optim.SGD(0.1)(spare.params() + layer.params())
    assert added_ops == ["sgd", "sgd"]
    for p, old in zip(spare.params(), untouched):
        np.testing.assert_array_equal(p.value(), old)


def test_sgd_learning_rate_can_change_between_steps():
    layer = layers.Linear(3, 1, dtype="float64")
    sgd = optim.SGD(0.1)
    for lr in (0.1, 0.5):
        sgd.learning_rate = lr
        (g, _) = _with_grads(layer, np.ones((2, 3)))
        w = layer.w.value().copy()
        sgd(layer.params())
        np.testing.assert_allclose(layer.w.value(), w - lr * g, rtol=1e-14)
    assert sgd.learning_rate == 0.5


def test_gradients_accumulate_over_backward_calls_until_a_step():
    layer = layers.Linear(3, 2, dtype="float64")
    x1, x2 = np.ones((2, 3)), np.arange(6.0).reshape(2, 3)
    alone = [_with_grads(layer, x) for x in (x1, x2)]
    _with_grads(layer, x1)
    tape.reset_global_tape()    # the next iteration, with no step in between
    layers.Mean()(layer(tape.Variable(x2))).backward()
    for p, g1, g2 in zip(layer.params(), *alone):
        np.testing.assert_allclose(p.grad.value(), g1 + g2, rtol=1e-12)


def test_a_tiny_training_loop_reduces_the_loss():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((64, 4)).astype(np.float32)
    y_np = (x_np @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.5).astype(np.float32)
    l1, l2 = layers.Linear(4, 16, act="tanh"), layers.Linear(16, 1)
    sgd, feed, mean = optim.SGD(learning_rate=0.05), layers.Fill(), layers.Mean()
    x, y = tape.Variable(name="x"), tape.Variable(name="y")
    losses = []
    for _ in range(100):
        tape.reset_global_tape()
        feed(x, x_np)
        feed(y, y_np)
        diff = tape.ops.elementwise_sub(l2(l1(x)), y)
        loss = mean(tape.ops.elementwise_mul(diff, diff))
        losses.append(float(loss.value()))
        loss.backward()
        sgd(l1.params() + l2.params())
    assert losses[-1] < 0.1 * losses[0]


def test_sgd_reuses_one_learning_rate_variable_per_dtype(monkeypatch):
    rates = []
    add_op = tape.Tape.add_op

    def spy(self, type, inputs, outputs=None, attrs=None):
        rates.append(inputs["LearningRate"][0])
        return add_op(self, type, inputs, outputs, attrs)

    layer = layers.Linear(3, 2)
    sgd = optim.SGD(0.1)
    monkeypatch.setattr(tape.Tape, "add_op", spy)
    for _ in range(2):
        _with_grads(layer, np.ones((2, 3), np.float32))
        sgd(layer.params())
    assert len(rates) == 4 and all(r is rates[0] for r in rates)
    assert rates[0].shape == (1,) and rates[0].dtype == np.float32


def test_create_parameter_gives_a_layer_its_own_trainable_state():
    class Scaled(layers.Layer):
        def __init__(self):
            self.gain = self.create_parameter((3, 4))
            self.shift = self.create_parameter((4,), "float64", is_bias=True)
            self.noise = self.create_parameter((2, 2), std=0.5)
    layer = Scaled()
    assert layer.params() == [layer.gain, layer.shift, layer.noise]
    assert layer.gain.name.startswith("scaled_") and layer.gain.name.endswith(".w_0")
    assert layer.shift.name.endswith(".b_0") and layer.shift.dtype == np.float64
    limit = np.sqrt(6.0 / (3 + 4))
    assert np.all(np.abs(layer.gain.value()) <= limit) and np.any(layer.gain.value() != 0)
    np.testing.assert_array_equal(layer.shift.value(), 0)
    assert set(layer.state_dict()) == {"gain", "shift", "noise"}
    with pytest.raises(tape.InvalidArgumentError, match=r"Scaled.create_parameter: shape must "
                                                        r"be non-empty with sizes >= 1, "
                                                        r"received \(3, 0\)"):
        layer.create_parameter((3, 0))
    with pytest.raises(tape.InvalidArgumentError, match="Scaled.create_parameter: dtype must be "
                                                        "floating"):
        layer.create_parameter((3,), "int64")
