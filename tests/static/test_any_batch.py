"""Tape's recurrent models traced at one batch size serve any other: in Tape's Executor and in
Paddle's predictor, every output matches the eager model run at that batch size. Their zero
states are built when the program runs, from the fed batch (shape + slice + fill_constant with a
ShapeTensorList), so the saved parameters are the model's own and nothing else; sequence
lengths given as a Variable are a second feed, of the same free batch size."""
import shutil

import numpy as np
import pytest
from paddle_runner import PREDICTOR_MODES, needs_paddle, paddle_serve

import tape
import tape.static as static
from tape import layers

TRACED, SERVED = 2, (1, 3)
RNG = np.random.default_rng(4)
X = RNG.standard_normal((3, 5, 4)).astype(np.float32)    # (batch, time, input)
LENGTHS = np.array([2, 5, 0], np.int64)


def _states(out, states):
    return (out, *states) if isinstance(states, tuple) else (out, states)


def _cell_loop(cell):
    """The cell over the time steps of (batch, time, input) x, from its zero state."""
    def run(x):
        state = None
        for t in range(X.shape[1]):
            step = tape.ops.squeeze2(tape.ops.slice(x, axes=[1], starts=[t], ends=[t + 1]),
                                     axes=[1])
            state = cell(step, state)
        return state
    return run


def _models():
    """{name: (the function traced, the layers holding its parameters, whether it takes
    sequence lengths)}."""
    tape.seed(5)
    lstm = layers.LSTM(4, 6, num_layers=2, direction="bidirect").eval()
    gru = layers.GRU(4, 6).eval()
    gru_lengths = layers.GRU(4, 3, num_layers=2, direction="bidirect").eval()
    lstm_cell, gru_cell, rnn_cell = layers.LSTMCell(4, 3), layers.GRUCell(4, 3), \
        layers.SimpleRNNCell(4, 3)
    return {
        "lstm": (lambda x: _states(*lstm(x)), lstm, False),
        "gru": (lambda x: _states(*gru(x)), gru, False),
        "lstm_lengths": (lambda x, n: _states(*lstm(x, None, n)), lstm, True),
        "gru_lengths": (lambda x, n: _states(*gru_lengths(x, None, n)), gru_lengths, True),
        "lstm_cell": (_cell_loop(lstm_cell), lstm_cell, False),
        "gru_cell": (_cell_loop(gru_cell), gru_cell, False),
        "simple_rnn_cell": (_cell_loop(rnn_cell), rnn_cell, False),
    }


def _batch(n, lengths):
    """The feeds of a batch of ``n``."""
    return [X[:n], LENGTHS[:n]] if lengths else [X[:n]]


def _eager(fn, feeds):
    with tape.no_grad():
        out = fn(*map(tape.Variable, feeds))
    return [v.numpy() for v in (out if isinstance(out, (tuple, list)) else [out])]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{name: (directory of the model traced at batch TRACED, {batch: eager outputs}, program)}"""
    root, found = tmp_path_factory.mktemp("any_batch"), {}
    for name, (fn, layer, lengths) in _models().items():
        d = root / name
        program = static.trace(fn, *_batch(TRACED, lengths))
        static.save_inference_model(d, program)
        eager = {n: _eager(fn, _batch(n, lengths)) for n in SERVED}
        found[name] = d, eager, program, layer, lengths
    return found


@pytest.mark.parametrize("name", list(_models()))
def test_the_program_keeps_the_batch_free(exported, name):
    d, _, program, layer, _ = exported[name]
    block = program.global_block()
    persistable = {n for n, v in block.vars.items() if v.persistable and n not in
                   ("feed", "fetch")}
    assert persistable == {p.name for p in layer.params()}, \
        "a constant that follows the batch was saved with the program"
    for n in program.fetch_names:
        assert -1 in block.vars[n].shape, f"{n}: {block.vars[n].shape}"


@pytest.mark.parametrize("name", list(_models()))
@pytest.mark.parametrize("batch", SERVED)
def test_the_executor_serves_any_batch(exported, name, batch):
    d, eager, _, _, lengths = exported[name]
    loaded = static.load_inference_model(d)
    got = static.Executor().run(loaded, dict(zip(loaded.feed_names, _batch(batch, lengths))),
                                loaded.fetch_names)
    for ours, want in zip(got, eager[batch], strict=True):
        assert ours.shape == want.shape
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def served(exported, tmp_path_factory):
    """{(name, batch): directory with Paddle's outputs}, one Paddle process for all."""
    root, dirs = tmp_path_factory.mktemp("any_batch_served"), {}
    for name, (d, _, _, _, lengths) in exported.items():
        for batch in SERVED:
            copy = root / f"{name}-{batch}"
            shutil.copytree(d, copy)
            np.savez(copy / "feeds.npz", *_batch(batch, lengths))
            dirs[name, batch] = copy
    paddle_serve(list(dirs.values()), PREDICTOR_MODES)
    return dirs


@needs_paddle
@pytest.mark.parametrize("name", list(_models()))
@pytest.mark.parametrize("batch", SERVED)
@pytest.mark.parametrize("mode", list(PREDICTOR_MODES))
def test_paddle_serves_any_batch(exported, served, name, batch, mode):
    import json
    d = served[name, batch]
    report = json.loads((d / "paddle.json").read_text())
    assert report[mode] == "ok", report[mode]
    outputs = np.load(d / f"{mode}.npz")
    got = [outputs[k] for k in outputs.files]
    want = exported[name][1][batch]
    assert len(got) == len(want)
    for ours, expected in zip(got, want):
        assert ours.shape == expected.shape
        np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
