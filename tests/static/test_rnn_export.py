"""An LSTM exported: traced in eval mode on a fixed number of time steps, saved with
save_inference_model, then run by Tape's Executor and by Paddle's predictor, which reproduce the
eager output."""
import numpy as np
import pytest
from paddle_runner import needs_paddle, paddle_predict

import tape
import tape.static as static
from tape import layers

RNG = np.random.default_rng(9)
X = RNG.standard_normal((3, 6, 5)).astype(np.float32)       # (batch, time, input)


def _lstm():
    tape.seed(2)
    return layers.LSTM(5, 8, num_layers=2, direction="bidirect", dropout=0.3).eval()


def _eager(lstm):
    with tape.no_grad():
        out, (h, c) = lstm(tape.Variable(X))
    return out.numpy(), h.numpy(), c.numpy()


def _export(dirname, lstm):
    """Traced on two sequences (the batch size stays free), saved; the op types traced."""
    program = static.trace(lambda x: (lambda out, states: (out, *states))(*lstm(x)), X[:2])
    static.save_inference_model(dirname, program)
    return [op.type for op in program.global_block().ops]


def test_the_executor_reproduces_the_eager_output(tmp_path):
    lstm = _lstm()
    types = _export(tmp_path, lstm)
    assert "dropout" not in types and types.count("sigmoid") == 2 * 2 * 6 * 3
    loaded = static.load_inference_model(tmp_path)
    got = static.Executor().run(loaded, {loaded.feed_names[0]: X}, loaded.fetch_names)
    for ours, want in zip(got, _eager(lstm), strict=True):
        assert ours.shape == want.shape
        np.testing.assert_allclose(ours, want, rtol=1e-6, atol=1e-6)


@needs_paddle
@pytest.mark.parametrize("batch", [1, 3])
def test_paddle_serves_the_export(tmp_path, batch):
    lstm = _lstm()
    _export(tmp_path, lstm)
    np.testing.assert_allclose(paddle_predict(tmp_path, X[:batch]), _eager(lstm)[0][:batch],
                               rtol=1e-5, atol=1e-5)
