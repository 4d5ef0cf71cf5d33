"""Attention layers exported: traced (in eval mode, or in training mode, which the export turns
to inference), saved with save_inference_model, then run by Tape's Executor and by Paddle's
predictor, which reproduce the eager eval output."""
import numpy as np
import pytest
from paddle_runner import needs_paddle, paddle_predict

import tape
import tape.static as static
from tape import layers

RNG = np.random.default_rng(8)
X = RNG.standard_normal((3, 6, 16)).astype(np.float32)
CAUSAL = np.tril(np.ones((6, 6), bool))          # a constant of the program, cast and scaled


def _encoder(normalize_before=False):
    """A 2-layer encoder (gelu, dropout 0.2, final norm) under a causal mask, in training
    mode."""
    tape.seed(1)
    layer = layers.TransformerEncoderLayer(16, 4, 32, dropout=0.2, activation="gelu",
                                           normalize_before=normalize_before)
    return layers.TransformerEncoder(layer, 2, norm=layers.LayerNorm(16))


def _eval_output(encoder, x):
    training = encoder.training
    encoder.eval()
    with tape.no_grad():
        out = encoder(tape.Variable(x), CAUSAL).numpy()
    encoder.train(training)
    return out


def _export(dirname, encoder):
    """Trace on one example (the batch size stays free), save; the op types traced."""
    program = static.trace(lambda x: encoder(x, CAUSAL), X[:1])
    static.save_inference_model(dirname, program)
    return [op.type for op in program.global_block().ops]


def _executor_output(dirname):
    loaded = static.load_inference_model(dirname)
    return static.Executor().run(loaded, {loaded.feed_names[0]: X}, loaded.fetch_names)[0]


@pytest.mark.parametrize("training", [False, True], ids=["eval", "training"])
def test_the_executor_reproduces_the_eager_eval_output(tmp_path, training):
    encoder = _encoder().train(training)
    types = _export(tmp_path, encoder)
    assert types.count("dropout") == (8 if training else 0)
    assert types.count("cast") == 2 and types.count("softmax") == 2
    np.testing.assert_allclose(_executor_output(tmp_path), _eval_output(encoder, X), rtol=1e-6,
                               atol=1e-6)


def test_attention_weights_are_a_second_fetch(tmp_path):
    mha = layers.MultiHeadAttention(16, 4, dropout=0.5, need_weights=True).eval()
    program = static.trace(lambda x: mha(x, attn_mask=CAUSAL), X[:1])
    out, weights = static.Executor().run(program, {program.feed_names[0]: X},
                                         program.fetch_names)
    with tape.no_grad():
        want_out, want_weights = mha(tape.Variable(X), attn_mask=CAUSAL)
    np.testing.assert_allclose(out, want_out.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(weights, want_weights.numpy(), rtol=1e-6, atol=1e-7)
    assert weights.shape == (3, 4, 6, 6) and np.all(weights[:, :, 0, 1:] == 0)


@needs_paddle
@pytest.mark.parametrize("normalize_before", [False, True], ids=["post-norm", "pre-norm"])
def test_paddle_serves_the_export(tmp_path, normalize_before):
    encoder = _encoder(normalize_before)                # traced in training mode
    _export(tmp_path, encoder)
    np.testing.assert_allclose(paddle_predict(tmp_path, X), _eval_output(encoder, X),
                               rtol=1e-5, atol=1e-5)
