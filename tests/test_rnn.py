"""LSTM, GRU and Flatten: forward against numpy and against live PaddlePaddle with the same
weights (loaded by Paddle's parameter names), padded sequences, gradients against central
differences, dropout in train / eval mode, state_dict round trips, and their errors."""
import re

import numpy as np
import pytest
from static.paddle_runner import needs_paddle, run_paddle
from test_recurrent import _check_directional_derivative, _gru_step, _lstm_step

import tape
from tape import layers
from tape.errors import InvalidArgumentError

RNG = np.random.default_rng(21)


def _reference(model, x, lengths=None, initial=None):
    """``model`` (an LSTM or a GRU) on ``x`` in numpy, step by step with the cells' equations:
    ``(outputs, final states)`` as the layer returns them."""
    lstm = isinstance(model, layers.LSTM)
    xs = x if model.time_major else x.transpose(1, 0, 2)         # (time, batch, width)
    steps, batch = xs.shape[:2]
    lengths = np.full(batch, steps) if lengths is None else lengths
    directions, count = model.num_directions, model.num_layers * model.num_directions
    zeros = np.zeros((count, batch, model.hidden_size))
    initial = (initial if lstm else (initial,)) if initial is not None else (zeros,) * (1 + lstm)
    finals = []
    for layer in range(model.num_layers):
        outputs = []
        for reverse in range(directions):
            cell = model._cells[layer, reverse]
            state = tuple(s[layer * directions + reverse] for s in initial)
            out = np.zeros(xs.shape[:2] + (model.hidden_size,))
            for t in reversed(range(steps)) if reverse else range(steps):
                new = _lstm_step(cell, xs[t], *state) if lstm else (_gru_step(cell, xs[t], *state),)
                keep = (t < lengths)[:, None]
                state = tuple(np.where(keep, n, s) for n, s in zip(new, state))
                out[t] = np.where(keep, new[0], 0.0)
            outputs.append(out)
            finals.append(state)
        xs = np.concatenate(outputs, axis=-1)
    states = tuple(np.stack(parts) for parts in zip(*finals))
    return (xs if model.time_major else xs.transpose(1, 0, 2)), (states if lstm else states[0])


def _run(model, x, initial=None, lengths=None):
    """The model's outputs and final states as numpy arrays, without recording."""
    if isinstance(initial, tuple):
        initial = tuple(map(tape.Variable, initial))
    elif initial is not None:
        initial = tape.Variable(initial)
    with tape.no_grad():
        out, states = model(tape.Variable(x), initial, lengths)
    states = tuple(s.numpy() for s in states) if isinstance(states, tuple) else states.numpy()
    return out.numpy(), states


def _initial(model, batch, rng=RNG):
    shape = (model.num_layers * model.num_directions, batch, model.hidden_size)
    parts = tuple(rng.standard_normal(shape).astype(model._dtype)
                  for _ in range(2 if isinstance(model, layers.LSTM) else 1))
    return parts if len(parts) == 2 else parts[0]


def _assert_close(got, want, **tolerance):
    """``(outputs, states)`` pairs: every array of ``got`` close to ``want``'s."""
    def arrays(result):
        out, states = result
        return [out, *(states if isinstance(states, tuple) else (states,))]
    for a, b in zip(arrays(got), arrays(want), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, **tolerance)


# ---- forward against numpy ----

@pytest.mark.parametrize("make", [layers.LSTM, layers.GRU])
@pytest.mark.parametrize("direction", ["forward", "bidirect"])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch-major", "time-major"])
def test_matches_numpy_on_padded_sequences(make, direction, time_major):
    model = make(3, 4, num_layers=2, direction=direction, time_major=time_major, dropout=0.5,
                 dtype="float64").eval()
    x = RNG.standard_normal((6, 2, 3) if time_major else (2, 6, 3))
    lengths, initial = np.array([6, 3]), _initial(model, 2)
    got = _run(model, x, initial, lengths)
    _assert_close(got, _reference(model, x, lengths, initial), rtol=1e-12, atol=1e-13)
    out = got[0] if time_major else got[0].transpose(1, 0, 2)
    assert out.shape == (6, 2, 4 * model.num_directions) and np.all(out[3:, 1] == 0)
    _assert_close(_run(model, x), _reference(model, x), rtol=1e-12, atol=1e-13)


def test_padding_steps_are_the_same_as_a_shorter_sequence():
    lstm = layers.LSTM(3, 5, num_layers=2, direction="bidirectional", dtype="float64")
    x = RNG.standard_normal((2, 7, 3))
    out, (h, c) = _run(lstm, x, lengths=np.array([7, 4]))
    short, (h_short, c_short) = _run(lstm, x[1:, :4])
    np.testing.assert_allclose(out[1, :4], short[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h[:, 1], h_short[:, 0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(c[:, 1], c_short[:, 0], rtol=1e-12, atol=1e-14)
    assert np.all(out[1, 4:] == 0)


def test_parameters_have_paddle_names_shapes_and_order():
    lstm = layers.LSTM(3, 5, num_layers=2, direction="bidirect")
    keys = [f"{w}_l{k}{suffix}" for k in (0, 1) for suffix in ("", "_reverse")
            for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    state = lstm.state_dict()
    assert list(state) == keys
    assert [state[k].shape for k in keys[:4]] == [(20, 3), (20, 5), (20,), (20,)]
    assert state["weight_ih_l1_reverse"].shape == (20, 10)
    names = [p.name for p in lstm.params()]
    assert len(set(names)) == 16 and names[0].startswith("lstm_cell_")
    gru = layers.GRU(3, 5)
    assert list(gru.state_dict()) == keys[:4] and gru.params()[0].name.startswith("gru_cell_")
    assert np.all(np.abs(state["weight_hh_l0"]) <= 1 / np.sqrt(5))


# ---- against live PaddlePaddle ----

PADDLE_SCRIPT = """
    import sys, numpy as np, paddle
    from paddle import nn
    data, out = np.load(sys.argv[1]), {}

    def t(name):
        return paddle.to_tensor(data[name])

    for name in ("lstm", "lstm_bi", "gru", "gru_bi"):
        kind, *rest = name.split("_")
        model = (nn.LSTM if kind == "lstm" else nn.GRU)(
            5, 6, num_layers=2, direction="bidirect" if rest else "forward",
            time_major=name == "gru_bi", dropout=0.3)
        loaded = set()
        for key, p in model.state_dict().items():
            if f"{name}/{key}" in data:
                p.set_value(data[f"{name}/{key}"])
                loaded.add(key)
        assert loaded == {k for k in model.state_dict() if not k[0].isdigit()}, loaded
        model.eval()
        initial = None
        if f"{name}/h0" in data:
            initial = (t(f"{name}/h0"), t(f"{name}/c0")) if kind == "lstm" else t(f"{name}/h0")
        x = t("x_time_major") if name == "gru_bi" else t("x")
        y, states = model(x, initial, sequence_length=t(f"{name}/lengths"))
        out[name] = y.numpy()
        for i, s in enumerate(states if kind == "lstm" else [states]):
            out[f"{name}/state{i}"] = s.numpy()
    for start, stop in ((1, -1), (0, 2), (-2, -1)):
        out[f"flatten_{start}_{stop}"] = nn.Flatten(start, stop)(t("image")).numpy()
    np.savez(sys.argv[2], **out)
"""

CASES = {   # name: (layer, initial states given, sequence lengths)
    "lstm": (lambda: layers.LSTM(5, 6, num_layers=2, dropout=0.3), True, [7, 2, 5]),
    "lstm_bi": (lambda: layers.LSTM(5, 6, num_layers=2, direction="bidirect", dropout=0.3),
                False, [3, 7, 1]),
    "gru": (lambda: layers.GRU(5, 6, num_layers=2, dropout=0.3), True, [4, 0, 7]),
    "gru_bi": (lambda: layers.GRU(5, 6, num_layers=2, direction="bidirect", time_major=True,
                                  dropout=0.3), True, [6, 7, 2]),
}


@pytest.fixture(scope="module")
def paddle_outputs(tmp_path_factory):
    """``{case: (Tape's output, Paddle's)}`` for float32 models in eval mode with the same
    weights and inputs; Paddle's from one process."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 7, 5)).astype(np.float32)
    data = {"x": x, "x_time_major": x.transpose(1, 0, 2).copy(),
            "image": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)}
    ours = {}
    for name, (make, with_initial, lengths) in CASES.items():
        model = make().eval()
        state = {k: rng.uniform(-0.6, 0.6, v.shape).astype(np.float32)
                 for k, v in model.state_dict().items()}
        model.load_state_dict(state)
        data.update({f"{name}/{k}": v for k, v in state.items()})
        data[f"{name}/lengths"] = lengths = np.array(lengths, np.int64)
        initial = _initial(model, 3, rng) if with_initial else None
        if with_initial:
            parts = initial if isinstance(initial, tuple) else (initial,)
            data.update({f"{name}/{k}": v for k, v in zip(("h0", "c0"), parts)})
        out, states = _run(model, data["x_time_major" if model.time_major else "x"], initial,
                           lengths)
        ours[name] = out
        for i, s in enumerate(states if isinstance(states, tuple) else (states,)):
            ours[f"{name}/state{i}"] = s
    for start, stop in ((1, -1), (0, 2), (-2, -1)):
        with tape.no_grad():
            ours[f"flatten_{start}_{stop}"] = layers.Flatten(start, stop)(
                tape.Variable(data["image"])).numpy()
    tmp = tmp_path_factory.mktemp("paddle_rnn")
    np.savez(tmp / "in.npz", **data)
    run_paddle(PADDLE_SCRIPT, tmp / "in.npz", tmp / "out.npz")
    theirs = dict(np.load(tmp / "out.npz"))
    assert set(theirs) == set(ours)
    return {name: (ours[name], theirs[name]) for name in ours}


@needs_paddle
@pytest.mark.parametrize("case", [f"{name}{part}" for name in CASES
                                  for part in ("", "/state0", "/state1")
                                  if not (part == "/state1" and name.startswith("gru"))])
def test_matches_paddle_with_the_same_weights(paddle_outputs, case):
    ours, theirs = paddle_outputs[case]
    assert ours.dtype == theirs.dtype == np.float32 and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@needs_paddle
@pytest.mark.parametrize("axes", ["1_-1", "0_2", "-2_-1"])
def test_flatten_matches_paddle(paddle_outputs, axes):
    ours, theirs = paddle_outputs[f"flatten_{axes}"]
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


# ---- gradients ----

@pytest.mark.parametrize("make", [layers.LSTM, layers.GRU])
def test_gradients_match_finite_differences(make):
    model = make(2, 3, num_layers=2, direction="bidirect", dtype="float64")
    x = tape.Variable(RNG.standard_normal((3, 4, 2)), stop_gradient=False)
    initial = _initial(model, 3)
    initial = tuple(tape.Variable(v, stop_gradient=False)
                    for v in (initial if isinstance(initial, tuple) else (initial,)))
    lengths = np.array([4, 2, 3])
    out_weights = RNG.standard_normal((3, 4, 6))
    state_weights = [RNG.standard_normal((4, 3, 3)) for _ in initial]

    def run():
        out, states = model(x, initial if len(initial) == 2 else initial[0], lengths)
        terms = [tape.ops.elementwise_mul(v, tape.Variable(w)) for v, w in
                 zip((out, *(states if len(initial) == 2 else (states,))),
                     (out_weights, *state_weights))]
        return tape.ops.sum([tape.ops.reduce_sum(t, reduce_all=True) for t in terms])

    for seed in range(3):
        _check_directional_derivative(run, model.params() + [x, *initial], seed)


# ---- modes, state, Flatten, errors ----

def _dropout_probs(model, x):
    program = tape.static.trace(model, x)
    return [op.attrs["dropout_prob"] for op in program.global_block().ops
            if op.type == "dropout"]


def test_train_and_eval_switch_the_dropout_between_layers():
    gru = layers.GRU(3, 4, num_layers=3, direction="bidirect", dropout=0.4, dtype="float64")
    x = RNG.standard_normal((2, 5, 3))
    assert _dropout_probs(gru, x) == pytest.approx([0.4, 0.4])
    tape.seed(0)
    assert not np.allclose(_run(gru, x)[0], _run(gru, x)[0])
    assert gru.eval() is gru and not gru.dropout.training
    assert _dropout_probs(gru, x) == []
    _assert_close(_run(gru, x), _reference(gru, x), rtol=1e-12, atol=1e-13)
    assert gru.train().dropout.training
    assert _dropout_probs(layers.GRU(3, 4, num_layers=3), x.astype(np.float32)) == []


def test_state_dict_round_trip():
    def make():
        return layers.LSTM(3, 4, num_layers=2, direction="bidirect")
    a, b = make(), make()
    x = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    assert not np.allclose(_run(a, x)[0], _run(b, x)[0])
    b.load_state_dict(a.state_dict())
    _assert_close(_run(b, x), _run(a, x), rtol=0, atol=0)
    assert repr(b) == ("LSTM(3, 4, num_layers=2, direction='bidirect', time_major=False, "
                       "dropout=0.0, dtype=float32)")


def test_flatten_merges_the_axes_it_is_given():
    x = RNG.standard_normal((2, 3, 4, 5))
    with tape.no_grad():
        for start, stop, shape in ((1, -1, (2, 60)), (0, 1, (6, 4, 5)), (-3, 2, (2, 12, 5)),
                                   (2, 2, (2, 3, 4, 5))):
            flat = layers.Flatten(start, stop)
            np.testing.assert_array_equal(flat(tape.Variable(x)).numpy(), x.reshape(shape))
    assert repr(layers.Flatten()) == "Flatten(start_axis=1, stop_axis=-1)" and not flat.params()
    with pytest.raises(InvalidArgumentError, match="flatten_contiguous_range: attribute "
                                                   "start_axis=3 comes after stop_axis=1"):
        layers.Flatten(3, 1)(tape.Variable(x))


@pytest.mark.parametrize("make, message", [
    (lambda: layers.LSTM(3, 4, direction="backward"),
     "LSTM: direction must be one of ['forward', 'bidirect', 'bidirectional'], received "
     "'backward'"),
    (lambda: layers.GRU(3, 0), "GRU: hidden_size must be a positive integer, received 0"),
    (lambda: layers.GRU(3, 4, num_layers=1.5),
     "GRU: num_layers must be a positive integer, received 1.5"),
    (lambda: layers.LSTM(3, 4, dropout=1.5), "LSTM: dropout must be in [0, 1], received 1.5"),
    (lambda: layers.LSTM(3, 4, dtype="int64"), "LSTM: dtype must be floating, received 'int64'"),
])
def test_bad_construction_is_refused(make, message):
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        make()


def _v(shape, dtype=np.float32):
    return tape.Variable(np.ones(shape, dtype))


@pytest.mark.parametrize("make, call, message", [
    (layers.LSTM, lambda m: m(_v((2, 3))),
     "LSTM: expected inputs of shape (batch, time, 3) with batch and time >= 1, received "
     "(2, 3)"),
    (layers.GRU, lambda m: m(_v((2, 5, 4))),
     "GRU: expected inputs of shape (batch, time, 3) with batch and time >= 1, received "
     "(2, 5, 4)"),
    (lambda *a, **k: layers.GRU(*a, time_major=True, **k), lambda m: m(np.ones((5, 2, 3))),
     "GRU: expected inputs of shape (time, batch, 3) with batch and time >= 1, received "
     "ndarray"),
    (layers.LSTM, lambda m: m(_v((2, 5, 3), np.float64)),
     "LSTM: expected inputs of dtype float32, received float64"),
    (layers.LSTM, lambda m: m(_v((2, 5, 3)), sequence_length=np.array([5, 2, 1])),
     "LSTM: expected sequence_length of integers of shape (batch,) = (2,), received int64 (3,)"),
    (layers.GRU, lambda m: m(_v((2, 5, 3)), sequence_length=np.array([5.0, 2.0])),
     "GRU: expected sequence_length of integers of shape (batch,) = (2,), received float64 "
     "(2,)"),
    (layers.GRU, lambda m: m(_v((2, 5, 3)), sequence_length=np.array([6, 2])),
     "GRU: sequence_length must be in [0, time] = [0, 5], received [6, 2]"),
    (layers.LSTM, lambda m: m(_v((2, 5, 3)), sequence_length=[-1, 2]),
     "LSTM: sequence_length must be in [0, time] = [0, 5], received [-1, 2]"),
    (layers.LSTM, lambda m: m(_v((2, 5, 3)), _v((2, 2, 4))),
     "LSTM: expected initial_states (h, c), each of shape (num_layers * num_directions, batch, "
     "hidden_size) = (2, 2, 4), float32, received float32 (2, 2, 4)"),
    (layers.LSTM, lambda m: m(_v((2, 5, 3)), (_v((2, 2, 4)), _v((2, 3, 4)))),
     "(2, 2, 4), float32, received float32 (2, 2, 4), float32 (2, 3, 4)"),
    (layers.GRU, lambda m: m(_v((2, 5, 3)), _v((2, 2, 4), np.float64)),
     "GRU: expected initial_states h of shape (num_layers * num_directions, batch, "
     "hidden_size) = (2, 2, 4), float32, received float64 (2, 2, 4)"),
])
def test_bad_calls_fail_before_any_op_runs(make, call, message, forbid_kernels):
    model = make(3, 4, num_layers=2)
    for op_type in ("transpose2", "reshape2", "split", "matmul_v2"):
        forbid_kernels(op_type)
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        call(model)
