"""LSTMCell, GRUCell and Sequential: forward against numpy, gradients through unrolled steps
against finite differences, and the character-level LSTM example learning."""
import importlib.util
import math
import pathlib

import numpy as np
import pytest

import tape
from tape import layers

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _lstm_step(cell, x, h, c):
    """PyTorch's LSTMCell equations in numpy."""
    w_ih, w_hh, b_ih, b_hh = (p.value() for p in cell.params())
    i, f, g, o = np.split(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c), c


def _gru_step(cell, x, h):
    """PyTorch's GRUCell equations in numpy."""
    w_ih, w_hh, b_ih, b_hh = (p.value() for p in cell.params())
    x_r, x_z, x_n = np.split(x @ w_ih.T + b_ih, 3, axis=1)
    h_r, h_z, h_n = np.split(h @ w_hh.T + b_hh, 3, axis=1)
    r, z = _sigmoid(x_r + h_r), _sigmoid(x_z + h_z)
    n = np.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h


def test_lstm_cell_follows_the_pytorch_equations_over_variable_lengths():
    rng = np.random.default_rng(0)
    cell = layers.LSTMCell(3, 5, dtype="float64")
    for length in (1, 4, 2):
        xs = rng.standard_normal((length, 2, 3))
        h, c = np.zeros((2, 5)), np.zeros((2, 5))
        state = None
        for x in xs:
            state = cell(tape.Variable(x), state)
            h, c = _lstm_step(cell, x, h, c)
        np.testing.assert_allclose(state[0].value(), h, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(state[1].value(), c, rtol=1e-12, atol=1e-14)


def test_gru_cell_follows_the_pytorch_equations():
    rng = np.random.default_rng(1)
    cell = layers.GRUCell(4, 3, dtype="float64")
    h_np = rng.standard_normal((2, 3))
    h = tape.Variable(h_np)
    for x in rng.standard_normal((3, 2, 4)):
        h = cell(tape.Variable(x), h)
        h_np = _gru_step(cell, x, h_np)
    np.testing.assert_allclose(h.value(), h_np, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("make, gates, prefix", [(layers.LSTMCell, 4, "lstm_cell"),
                                                 (layers.GRUCell, 3, "gru_cell")])
def test_cell_parameters_are_paddle_named_and_uniform(make, gates, prefix):
    cell = make(50, 100)
    names = [p.name for p in cell.params()]
    stem = names[0].rsplit(".", 1)[0]
    assert stem.startswith(prefix + "_")
    assert names == [f"{stem}.w_0", f"{stem}.w_1", f"{stem}.b_0", f"{stem}.b_1"]
    shapes = [p.shape for p in cell.params()]
    assert shapes == [(gates * 100, 50), (gates * 100, 100), (gates * 100,), (gates * 100,)]
    bound = 1 / math.sqrt(100)
    for p in cell.params():
        v = p.value()
        assert v.dtype == np.float32 and p.desc.persistable and not p.stop_gradient
        assert np.all(np.abs(v) <= bound) and abs(v.std() - bound / math.sqrt(3)) < 0.1 * bound
    assert make(50, 100).params()[0].name != names[0]


def _loss_and_grads(run, variables):
    """``run()`` (a scalar Variable) on a fresh tape, and d loss / d each of ``variables``."""
    for v in variables:
        v.grad = None
    tape.reset_global_tape()
    loss = run()
    loss.backward()
    return float(loss.value()), [v.grad.value() for v in variables]


def _check_directional_derivative(run, variables, seed=0, step=1e-6):
    """The tape's gradient along a random direction against a float64 central difference."""
    rng = np.random.default_rng(seed)
    _, grads = _loss_and_grads(run, variables)
    directions = [rng.uniform(-1, 1, v.shape) for v in variables]
    values = [v.value() for v in variables]

    def loss_at(t):
        for value, d, base in zip(values, directions, originals):
            value[...] = base + t * d
        with tape.no_grad():
            return float(run().value())

    originals = [v.copy() for v in values]
    numeric = (loss_at(step) - loss_at(-step)) / (2 * step)
    loss_at(0.0)
    analytic = sum(float(np.sum(g * d)) for g, d in zip(grads, directions))
    assert abs(analytic - numeric) <= 1e-7 * max(1.0, abs(numeric)), (analytic, numeric)


def test_lstm_gradients_through_unrolled_steps_match_finite_differences():
    rng = np.random.default_rng(2)
    cell = layers.LSTMCell(3, 4, dtype="float64")
    xs = [tape.Variable(x, stop_gradient=False) for x in rng.standard_normal((4, 2, 3))]
    h0 = tape.Variable(rng.standard_normal((2, 4)), stop_gradient=False)
    c0 = tape.Variable(rng.standard_normal((2, 4)), stop_gradient=False)
    weights = rng.standard_normal((2, 4))

    def run():
        state, total = (h0, c0), None
        for x in xs:
            state = cell(x, state)
            term = tape.ops.reduce_sum(tape.ops.elementwise_mul(state[0], tape.Variable(weights)),
                                       dim=[], reduce_all=True)
            total = term if total is None else tape.ops.elementwise_add(total, term)
        return tape.ops.elementwise_add(total, tape.ops.mean(state[1]))

    for seed in range(3):
        _check_directional_derivative(run, cell.params() + xs + [h0, c0], seed)


def test_gru_gradients_through_unrolled_steps_match_finite_differences():
    rng = np.random.default_rng(3)
    cell = layers.GRUCell(2, 3, dtype="float64")
    xs = [tape.Variable(x, stop_gradient=False) for x in rng.standard_normal((3, 4, 2))]
    h0 = tape.Variable(rng.standard_normal((4, 3)), stop_gradient=False)

    def run():
        h = h0
        for x in xs:
            h = cell(x, h)
        return tape.ops.mean(tape.ops.square(h))

    for seed in range(3):
        _check_directional_derivative(run, cell.params() + xs + [h0], seed)


def test_cells_reject_mismatched_inputs_and_states():
    lstm, gru = layers.LSTMCell(3, 4), layers.GRUCell(3, 4)
    x = tape.Variable(np.ones((2, 3), np.float32))
    error = tape.InvalidArgumentError
    with pytest.raises(error, match=r"LSTMCell: expected x of shape \(batch, 3\)"):
        lstm(tape.Variable(np.ones((2, 5), np.float32)))
    with pytest.raises(error, match=r"LSTMCell: expected c of shape \(2, 4\)"):
        lstm(x, (lstm.zeros(2), lstm.zeros(3)))
    with pytest.raises(error, match=r"GRUCell: expected h of shape \(2, 4\)"):
        gru(x, tape.Variable(np.ones((2, 5), np.float32)))
    with pytest.raises(error, match="floating"):
        layers.LSTMCell(3, 4, dtype="int32")


def test_sequential_calls_in_order_and_collects_params():
    first, second = layers.Linear(3, 4, dtype="float64"), layers.Linear(4, 2, dtype="float64")
    model = layers.Sequential(first, tape.ops.tanh, second)
    x = np.random.default_rng(4).standard_normal((5, 3))
    expected = np.tanh(x @ first.w.value() + first.b.value()) @ second.w.value() + \
        second.b.value()
    np.testing.assert_allclose(model(tape.Variable(x)).value(), expected, rtol=1e-12)
    assert model.params() == first.params() + second.params()
    assert len(model) == 3 and model[2] is second
    v = tape.Variable(x)
    assert layers.Sequential()(v) is v
    model.eval()
    assert not first.training and not second.training


def _char_lstm():
    spec = importlib.util.spec_from_file_location("char_lstm", ROOT / "examples" / "char_lstm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_char_lstm_example_learns_and_samples():
    example = _char_lstm()
    model, vocab, history = example.train(steps=600, hidden=64, embed=16, min_len=8,
                                          max_len=32, report_every=150, log=lambda _: None)
    assert history[-1] < history[0] - 0.3, history
    text = example.sample(model, vocab, length=50)
    assert len(text) == len("The ") + 50 and set(text) <= set(vocab)
