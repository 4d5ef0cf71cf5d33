"""Paddle's fused rnn op beside live PaddlePaddle: paddle.nn.LSTM, GRU and SimpleRNN in a legacy
static program emit it; Tape runs the same op (Paddle's slots, attributes and weight order) on
the same values and gets Paddle's outputs and gradients; and the models Paddle saves for
inference load and run in Tape's Executor at any batch size. One Paddle process for all."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from paddle_ops import needs_paddle

import tape
import tape.static as static

# name: (layer, mode, input size, hidden size, num_layers, direction, with lengths)
CONFIGS = {
    "lstm": ("LSTM", "LSTM", 3, 4, 2, "bidirect", True),
    "lstm_lengths": ("LSTM", "LSTM", 2, 3, 2, "forward", True),
    "lstm_bidirect": ("LSTM", "LSTM", 2, 3, 1, "bidirect", False),
    "gru": ("GRU", "GRU", 3, 5, 1, "forward", False),
    "gru_lengths": ("GRU", "GRU", 2, 3, 2, "bidirect", True),
    "rnn_tanh": ("SimpleRNN", "RNN_TANH", 3, 4, 1, "bidirect", False),
    "rnn_relu": ("SimpleRNN", "RNN_RELU", 2, 3, 2, "forward", True),
}
BATCH, STEPS = 3, 5
LENGTHS = np.array([5, 2, 4], np.int64)
SERVED = (1, 4)

_SCRIPT = """
    import json, sys, numpy as np, paddle
    paddle.enable_static()
    paddle.set_default_dtype("float64")
    out_dir, configs = sys.argv[1], json.loads(sys.argv[2])
    batch, steps, lengths, served = 3, 5, np.array([5, 2, 4], np.int64), (1, 4)
    exe, report, arrays = paddle.static.Executor(paddle.CPUPlace()), {}, {}

    def total(v):   # paddle.sum fails in legacy static mode (3.3.1): the reduce_sum op itself
        block = paddle.static.default_main_program().current_block()
        out = block.create_var(dtype=v.dtype, shape=[])
        block.append_op(type="reduce_sum", inputs={"X": [v]}, outputs={"Out": [out]},
                        attrs={"reduce_all": True, "dim": [], "keep_dim": False})
        return out
    for name, (layer_type, mode, size, hidden, layers, direction, with_lengths) in configs.items():
        paddle.seed(7)
        rng = np.random.default_rng(len(name))
        count = layers * (2 if direction == "bidirect" else 1)
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, steps, size], "float64")
            h0 = paddle.static.data("h0", [count, -1, hidden], "float64")
            feed = {"x": rng.standard_normal((batch, steps, size)),
                    "h0": rng.standard_normal((count, batch, hidden))}
            kwargs = {"activation": "relu"} if mode == "RNN_RELU" else {}
            layer = getattr(paddle.nn, layer_type)(size, hidden, layers, direction, **kwargs)
            states = h0
            if mode == "LSTM":
                c0 = paddle.static.data("c0", [count, -1, hidden], "float64")
                feed["c0"] = rng.standard_normal((count, batch, hidden))
                states = (h0, c0)
            seq = None
            if with_lengths:
                seq = paddle.static.data("seq", [-1], "int64")
                feed["seq"] = lengths
            for v in (x, h0, *(states if mode == "LSTM" else ())):
                v.stop_gradient = False
            out, final = layer(x, states, seq)
            finals = list(final) if mode == "LSTM" else [final]
            cot = paddle.static.data("cot", [-1, steps, out.shape[-1]], "float64")
            feed["cot"] = rng.standard_normal((batch, steps, out.shape[-1]))
            loss = total(out * cot)
            for i, f in enumerate(finals):
                loss = loss + total(f * (i + 2))
            rnn = [op for op in main.global_block().ops if op.type == "rnn"]
            assert len(rnn) == 1, [op.type for op in main.global_block().ops]
            op = rnn[0]
            weights = [main.global_block().var(n) for n in op.input("WeightList")]
            wrt = [x, *(states if mode == "LSTM" else [h0]), *weights]
            grads = paddle.static.gradients([loss], wrt)
            served_y, _ = layer(x)     # from zero states, for the inference model
        exe.run(startup)
        values = exe.run(main, feed=feed, fetch_list=[out, *finals, *grads, *weights])
        report[name] = {"attrs": {k: op.attr(k) for k in ("dropout_prob", "is_bidirec",
                                  "input_size", "hidden_size", "num_layers", "mode", "seed",
                                  "is_test")},
                        "fetched": len(values)}
        for k, v in feed.items():
            arrays[f"{name}/feed/{k}"] = v
        for i, v in enumerate(values):
            arrays[f"{name}/{i}"] = v
        # the same layer for inference, saved as a legacy model, run by Paddle at two batches
        d = f"{out_dir}/{name}_model"
        paddle.static.save_inference_model(d + "/model", [x], [served_y], exe, program=main)
        loaded, feeds, fetches = paddle.static.load_inference_model(d + "/model", exe)
        for b in served:
            xb = rng.standard_normal((b, steps, size))
            arrays[f"{name}/served/{b}/x"] = xb
            arrays[f"{name}/served/{b}/y"] = exe.run(loaded, feed={feeds[0]: xb},
                                                     fetch_list=fetches)[0]
    np.savez(out_dir + "/results.npz", **arrays)
    json.dump(report, open(out_dir + "/report.json", "w"))
"""


@pytest.fixture(scope="module")
def paddle_rnn(tmp_path_factory):
    d = tmp_path_factory.mktemp("paddle_rnn")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), str(d),
                           json.dumps(CONFIGS)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "FLAGS_enable_pir_api": "0",
                               "GLOG_minloglevel": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    return d, json.loads((d / "report.json").read_text()), np.load(d / "results.npz")


def _tape_rnn(attrs, feed, weights):
    """Out (batch-major), final states and the gradients of the loss Paddle's script takes, by
    Tape's rnn op."""
    tape.reset_global_tape()
    lstm = attrs["mode"] == "LSTM"
    x = tape.Variable(feed["x"], stop_gradient=False)
    states = [tape.Variable(feed[k], stop_gradient=False) for k in (("h0", "c0") if lstm
                                                                    else ("h0",))]
    ws = [tape.Variable(w, stop_gradient=False) for w in weights]
    seq = tape.Variable(feed["seq"]) if "seq" in feed else None
    out, _, finals = tape.ops.rnn(tape.ops.transpose2(x, axis=[1, 0, 2]), states, ws, seq,
                                  **attrs)
    out = tape.ops.transpose2(out, axis=[1, 0, 2])
    loss = tape.ops.reduce_sum(tape.ops.elementwise_mul(out, tape.Variable(feed["cot"])),
                               reduce_all=True)
    for i, f in enumerate(finals):
        loss = tape.ops.elementwise_add(loss, tape.ops.reduce_sum(
            tape.ops.scale(f, scale=float(i + 2)), reduce_all=True))
    values = [out.numpy(), *(f.numpy() for f in finals)]
    loss.backward()
    return values + [v.grad.numpy() for v in [x, *states, *ws]]


def _paddle_grad_bug(name) -> bool:
    """Paddle's rnn_grad is wrong for a bidirectional network with SequenceLength: its forward
    equals Tape's, but its gradients (the reverse direction's weight_hh for an LSTM; the input,
    initial state and most weights for a GRU) differ from central differences of that very
    forward, which Tape's match (checked below, and by the generic test)."""
    return CONFIGS[name][5] == "bidirect" and CONFIGS[name][6]


def _directional(attrs, feed, weights, grads, seed=0):
    """(central difference of the loss along a random direction of the input and weights,
    the same derivative from ``grads``, the gradients of input, states and weights)."""
    rng = np.random.default_rng(seed)
    keys = ["x"]
    direction = {k: rng.standard_normal(feed[k].shape) for k in keys}
    w_dir = [rng.standard_normal(w.shape) for w in weights]

    def loss(step):
        f = {**feed, **{k: feed[k] + step * direction[k] for k in keys}}
        values = _tape_rnn(attrs, f, [w + step * d for w, d in zip(weights, w_dir)])
        finals = values[1:1 + (2 if attrs["mode"] == "LSTM" else 1)]
        return float((values[0] * feed["cot"]).sum() +
                      sum((i + 2) * s.sum() for i, s in enumerate(finals)))

    h = 1e-6
    numeric = (loss(h) - loss(-h)) / (2 * h)
    x_grad, w_grads = grads[0], grads[-len(weights):]
    analytic = float((x_grad * direction["x"]).sum() +
                     sum((g * d).sum() for g, d in zip(w_grads, w_dir)))
    return numeric, analytic


@needs_paddle
@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_rnn_op_gives_paddles_outputs_and_gradients(paddle_rnn, name):
    _, report, arrays = paddle_rnn
    attrs = report[name]["attrs"]
    assert attrs["mode"] == CONFIGS[name][1]
    lstm = attrs["mode"] == "LSTM"
    count = attrs["num_layers"] * (2 if attrs["is_bidirec"] else 1)
    fetched = [arrays[f"{name}/{i}"] for i in range(report[name]["fetched"])]
    weights = fetched[-4 * count:]
    feed = {k.split("/")[-1]: arrays[k] for k in arrays.files if k.startswith(f"{name}/feed/")}
    ours = _tape_rnn(attrs, feed, weights)
    want = fetched[:-4 * count]
    states = 2 if lstm else 1
    assert len(ours) == len(want) == 1 + states * 2 + 1 + 4 * count
    values = 1 + states       # Out and the final states; the rest are gradients
    for i, (got, expected) in enumerate(zip(ours, want)):
        assert got.shape == expected.shape, i
        if i < values or not _paddle_grad_bug(name):
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10,
                                       err_msg=f"value {i}")
    if _paddle_grad_bug(name):
        grads_at = slice(values, None)
        numeric, tape_derivative = _directional(attrs, feed, weights, ours[grads_at])
        _, paddle_derivative = _directional(attrs, feed, weights, want[grads_at])
        assert tape_derivative == pytest.approx(numeric, rel=1e-7)
        assert paddle_derivative != pytest.approx(numeric, rel=1e-3)
        pytest.xfail("Paddle's rnn_grad is wrong for a bidirectional network with "
                     "SequenceLength: its derivative along a random direction is "
                     f"{paddle_derivative:.6g}, central differences of its own forward (equal "
                     f"to Tape's) give {numeric:.6g}, Tape's gradient {tape_derivative:.6g}")


@needs_paddle
@pytest.mark.parametrize("name", list(CONFIGS))
def test_tape_runs_the_inference_model_paddle_saves(paddle_rnn, name):
    d, _, arrays = paddle_rnn
    program = static.load_inference_model(d / f"{name}_model")
    types = [op.type for op in program.global_block().ops]
    assert "rnn" in types and "fill_constant" in types and "shape" in types
    for batch in SERVED:
        x = arrays[f"{name}/served/{batch}/x"]
        got, = static.Executor().run(program, {program.feed_names[0]: x}, program.fetch_names)
        want = arrays[f"{name}/served/{batch}/y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
