"""MultiHeadAttention, TransformerEncoderLayer and TransformerEncoder: forward against numpy and
against live PaddlePaddle with the same weights, gradients against central differences, the
dropouts in train / eval mode, state_dict round trips, and their errors."""
import math
import re

import numpy as np
import pytest
from static.paddle_runner import needs_paddle, run_paddle
from test_recurrent import _check_directional_derivative

import tape
from tape import layers
from tape.errors import InvalidArgumentError

RNG = np.random.default_rng(11)


# ---- numpy references, on state_dict values ----

def _linear(s, prefix, x):
    return x @ s[f"{prefix}.w"] + s[f"{prefix}.b"]


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _additive(mask, dtype):
    if mask is None or mask.dtype.kind == "f":
        return mask
    return (mask.astype(dtype) - 1.0) * 1e9


def _mha(s, prefix, heads, query, key=None, value=None, mask=None):
    key = query if key is None else key
    value = query if value is None else value

    def split(x):                                     # (b, l, e) -> (b, h, l, e / h)
        b, n, e = x.shape
        return x.reshape(b, n, heads, e // heads).transpose(0, 2, 1, 3)
    q, k, v = (split(_linear(s, f"{prefix}{name}_proj", x))
               for name, x in (("q", query), ("k", key), ("v", value)))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + _additive(mask, query.dtype)
    weights = _softmax(scores)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(query.shape[:2] + (-1,))
    return _linear(s, f"{prefix}out_proj", out), weights


def _layer_norm(s, prefix, x, eps=1e-5):
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * s[f"{prefix}.weight"] + s[f"{prefix}.bias"]


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))


ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0), "gelu": _gelu}


def _encoder_layer(s, prefix, heads, x, mask=None, pre=False, act="relu"):
    h = _layer_norm(s, f"{prefix}norm1", x) if pre else x
    x = x + _mha(s, f"{prefix}self_attn.", heads, h, mask=mask)[0]
    x = x if pre else _layer_norm(s, f"{prefix}norm1", x)
    h = _layer_norm(s, f"{prefix}norm2", x) if pre else x
    x = x + _linear(s, f"{prefix}linear2", ACTIVATIONS[act](_linear(s, f"{prefix}linear1", h)))
    return x if pre else _layer_norm(s, f"{prefix}norm2", x)


# ---- helpers ----

def _run(fn, *arrays):
    """``fn`` on Variables of ``arrays`` without recording; the outputs as numpy arrays."""
    with tape.no_grad():
        out = fn(*(tape.Variable(a) for a in arrays))
    return tuple(o.numpy() for o in out) if isinstance(out, tuple) else out.numpy()


def _randomize(layer, rng=RNG):
    """Random values in every parameter, in place (LayerNorms' scales around 1, their biases and
    the Linear layers' around 0); the new state_dict."""
    state = {k: (rng.normal(0.0, 0.5, v.shape) + k.endswith(".weight")).astype(v.dtype)
             for k, v in layer.state_dict().items()}
    layer.load_state_dict(state)
    return layer.state_dict()


def _causal(n, batch=1):
    return np.broadcast_to(np.tril(np.ones((n, n), bool)), (batch, 1, n, n)).copy()


# ---- forward against numpy ----

@pytest.mark.parametrize("mask", [None, "float", "bool", "int"])
def test_self_attention_matches_numpy(mask):
    mha = layers.MultiHeadAttention(12, 3, need_weights=True, dtype="float64")
    s = _randomize(mha)
    x = RNG.standard_normal((2, 5, 12))
    m = {None: None, "float": RNG.standard_normal((2, 1, 5, 5)), "bool": _causal(5, 2),
         "int": _causal(5).astype(np.int64)}[mask]
    out, weights = _run(lambda v: mha(v, attn_mask=m), x)
    want_out, want_weights = _mha(s, "", 3, x, mask=m)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-12, atol=1e-12)
    if mask in ("bool", "int"):
        assert np.all(weights[..., np.triu(np.ones((5, 5), bool), 1)] == 0)


def test_cross_attention_with_other_key_and_value_widths_matches_numpy():
    mha = layers.MultiHeadAttention(8, 2, kdim=6, vdim=3, dtype="float64")
    s = _randomize(mha)
    q, k, v = (RNG.standard_normal(shape) for shape in ((2, 4, 8), (2, 7, 6), (2, 7, 3)))
    mask = RNG.standard_normal((4, 7))                  # broadcasts over batch and heads
    out = _run(lambda *a: mha(*a, attn_mask=mask), q, k, v)
    assert [p.shape for p in mha.params()] == [(8, 8), (8,), (6, 8), (8,), (3, 8), (8,),
                                               (8, 8), (8,)]
    np.testing.assert_allclose(out, _mha(s, "", 2, q, k, v, mask)[0], rtol=1e-12, atol=1e-12)


def test_a_float32_mask_is_cast_for_a_float64_layer():
    mha = layers.MultiHeadAttention(4, 2, dtype="float64")
    s = _randomize(mha)
    x, mask = RNG.standard_normal((1, 3, 4)), RNG.standard_normal((3, 3)).astype(np.float32)
    np.testing.assert_allclose(_run(lambda v: mha(v, attn_mask=mask), x),
                               _mha(s, "", 2, x, mask=mask.astype(np.float64))[0], rtol=1e-12)


@pytest.mark.parametrize("pre, act", [(False, "relu"), (True, "relu"), (False, "gelu")])
def test_encoder_layer_matches_numpy(pre, act):
    layer = layers.TransformerEncoderLayer(8, 2, 16, activation=act, normalize_before=pre,
                                           dtype="float64").eval()
    s = _randomize(layer)
    x, mask = RNG.standard_normal((3, 5, 8)), _causal(5)
    out = _run(lambda v: layer(v, mask), x)
    np.testing.assert_allclose(out, _encoder_layer(s, "", 2, x, mask, pre, act), rtol=1e-11,
                               atol=1e-12)


def test_encoder_stacks_layers_built_from_the_same_arguments_then_the_norm():
    first = layers.TransformerEncoderLayer(8, 2, 16, dropout=0.0, normalize_before=True,
                                           dtype="float64")
    encoder = layers.TransformerEncoder(first, 3, norm=layers.LayerNorm(8, dtype="float64"))
    assert encoder.layers[0] is first and len(encoder.layers) == 3
    assert all(repr(layer) == repr(first) for layer in encoder.layers)
    assert len({p.name for p in encoder.params()}) == 3 * len(first.params()) + 2
    s = _randomize(encoder)
    x, mask = RNG.standard_normal((2, 4, 8)), _causal(4)
    want = x
    for i in range(3):
        want = _encoder_layer(s, f"layers.{i}.", 2, want, mask, pre=True)
    np.testing.assert_allclose(_run(lambda v: encoder(v, mask), x),
                               _layer_norm(s, "norm", want), rtol=1e-11, atol=1e-12)


# ---- against live PaddlePaddle ----

PADDLE_SCRIPT = """
    import sys, numpy as np, paddle
    from paddle import nn
    data, out = np.load(sys.argv[1]), {}

    def load(model, prefix):
        for key, p in model.state_dict().items():
            p.set_value(data[f"{prefix}/{key}"])
        return model.eval()

    def t(name):
        return paddle.to_tensor(data[name])

    mha = load(nn.MultiHeadAttention(12, 3, kdim=6, vdim=5, need_weights=True), "mha")
    out["mha"], out["mha/weights"] = (
        r.numpy() for r in mha(t("q"), t("k"), t("v"), attn_mask=t("cross_mask")))
    mha = load(nn.MultiHeadAttention(12, 3), "mha_bool")
    out["mha_bool"] = mha(t("q"), attn_mask=t("causal")).numpy()
    for pre in (False, True):
        layer = load(nn.TransformerEncoderLayer(12, 3, 24, normalize_before=pre,
                                                activation="gelu"), f"layer_{pre}")
        out[f"layer_{pre}"] = layer(t("q"), t("self_mask")).numpy()
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(12, 3, 24), 2,
                                    norm=nn.LayerNorm(12))
    out["encoder"] = load(encoder, "encoder")(t("q"), t("causal")).numpy()
    np.savez(sys.argv[2], **out)
"""


def _paddle_key(key):
    """Our state_dict key as Paddle's: Linear's ``w`` / ``b`` are its ``weight`` / ``bias``."""
    head, _, last = key.rpartition(".")
    return f"{head}.{ {'w': 'weight', 'b': 'bias'}.get(last, last)}"


@pytest.fixture(scope="module")
def paddle_outputs(tmp_path_factory):
    """``{case: (Tape's output, Paddle's)}`` for float32 models in eval mode with the same
    weights and inputs; Paddle's from one process."""
    rng = np.random.default_rng(3)
    data = {k: rng.standard_normal(shape).astype(np.float32) for k, shape in
            (("q", (2, 5, 12)), ("k", (2, 7, 6)), ("v", (2, 7, 5)),
             ("cross_mask", (2, 1, 5, 7)), ("self_mask", (2, 1, 5, 5)))}
    data["cross_mask"][..., -1] = -1e9                          # one position dropped
    data["causal"] = _causal(5)
    q, k, v = (tape.Variable(data[n]) for n in "qkv")
    cases = {   # name: (model, its call)
        "mha": (layers.MultiHeadAttention(12, 3, kdim=6, vdim=5, need_weights=True),
                lambda m: m(q, k, v, attn_mask=data["cross_mask"])),
        "mha_bool": (layers.MultiHeadAttention(12, 3),
                     lambda m: m(q, attn_mask=data["causal"])),
        "encoder": (layers.TransformerEncoder(layers.TransformerEncoderLayer(12, 3, 24), 2,
                                              norm=layers.LayerNorm(12)),
                    lambda m: m(q, data["causal"]))}
    for pre in (False, True):
        cases[f"layer_{pre}"] = (layers.TransformerEncoderLayer(12, 3, 24, activation="gelu",
                                                                normalize_before=pre),
                                 lambda m: m(q, data["self_mask"]))
    ours = {}
    for name, (model, call) in cases.items():
        state = _randomize(model.eval(), rng)
        data.update({f"{name}/{_paddle_key(k)}": v for k, v in state.items()})
        with tape.no_grad():
            out = call(model)
        if isinstance(out, tuple):
            out, ours[f"{name}/weights"] = out[0], out[1].numpy()
        ours[name] = out.numpy()
    tmp = tmp_path_factory.mktemp("paddle_attention")
    np.savez(tmp / "in.npz", **data)
    run_paddle(PADDLE_SCRIPT, tmp / "in.npz", tmp / "out.npz")
    theirs = dict(np.load(tmp / "out.npz"))
    return {name: (ours[name], theirs[name]) for name in ours}


@needs_paddle
@pytest.mark.parametrize("case", ["mha", "mha/weights", "mha_bool", "layer_False",
                                  "layer_True", "encoder"])
def test_matches_paddle_with_the_same_weights(paddle_outputs, case):
    ours, theirs = paddle_outputs[case]
    assert ours.dtype == theirs.dtype == np.float32 and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


# ---- gradients ----

def _weighted_sum(out, weights):
    return tape.ops.reduce_sum(tape.ops.elementwise_mul(out, tape.Variable(weights)),
                               reduce_all=True)


def test_attention_gradients_match_finite_differences():
    mha = layers.MultiHeadAttention(6, 2, kdim=4, vdim=3, dtype="float64")
    _randomize(mha)
    q, k, v = (tape.Variable(RNG.standard_normal(shape), stop_gradient=False)
               for shape in ((2, 3, 6), (2, 4, 4), (2, 4, 3)))
    mask, cotangent = RNG.standard_normal((2, 1, 3, 4)), RNG.standard_normal((2, 3, 6))

    def run():
        return _weighted_sum(mha(q, k, v, attn_mask=mask), cotangent)

    for seed in range(3):
        _check_directional_derivative(run, mha.params() + [q, k, v], seed)


@pytest.mark.parametrize("pre", [False, True])
def test_encoder_layer_gradients_match_finite_differences(pre):
    layer = layers.TransformerEncoderLayer(6, 2, 8, dropout=0.0, activation="gelu",
                                           normalize_before=pre, dtype="float64")
    _randomize(layer)
    x = tape.Variable(RNG.standard_normal((2, 4, 6)), stop_gradient=False)
    cotangent = RNG.standard_normal((2, 4, 6))

    def run():
        return _weighted_sum(layer(x, _causal(4)), cotangent)

    for seed in range(3):
        _check_directional_derivative(run, layer.params() + [x], seed)


# ---- modes, state, errors ----

def _dropout_ops(model, x):
    program = tape.static.trace(model, x)
    return [op.attrs["dropout_prob"] for op in program.global_block().ops
            if op.type == "dropout"]


def test_train_and_eval_switch_every_dropout():
    layer = layers.TransformerEncoderLayer(8, 2, 16, dropout=0.3, attn_dropout=0.2,
                                           act_dropout=0.1, dtype="float64")
    x = RNG.standard_normal((2, 5, 8))
    # attention weights, attention branch, after the activation, feed-forward branch
    assert _dropout_ops(layer, x) == pytest.approx([0.2, 0.3, 0.1, 0.3])
    tape.seed(0)
    first, second = _run(layer, x), _run(layer, x)
    assert not np.allclose(first, second)
    assert layer.eval() is layer and not any(sub.training for sub in (
        layer.self_attn.dropout, layer.dropout, layer.dropout1, layer.dropout2))
    assert _dropout_ops(layer, x) == []
    np.testing.assert_array_equal(_run(layer, x), _run(layer, x))
    np.testing.assert_allclose(_run(layer, x), _encoder_layer(layer.state_dict(), "", 2, x),
                               rtol=1e-11, atol=1e-12)
    layer.train()
    assert layer.self_attn.dropout.training and len(_dropout_ops(layer, x)) == 4


def test_state_dict_round_trip():
    def make():
        return layers.TransformerEncoder(layers.TransformerEncoderLayer(8, 2, 16), 2,
                                         norm=layers.LayerNorm(8)).eval()
    a, b = make(), make()
    state = _randomize(a)
    assert len(state) == len(a.params()) == 2 * 16 + 2
    assert {"layers.0.self_attn.q_proj.w", "layers.1.linear2.b", "layers.1.norm2.weight",
            "norm.bias"} <= set(state)
    x = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    assert not np.allclose(_run(a, x), _run(b, x))
    b.load_state_dict(state)
    np.testing.assert_array_equal(_run(a, x), _run(b, x))
    np.testing.assert_array_equal(b.state_dict()["layers.1.self_attn.out_proj.w"],
                                  state["layers.1.self_attn.out_proj.w"])


@pytest.mark.parametrize("make, message", [
    (lambda: layers.MultiHeadAttention(10, 3),
     "MultiHeadAttention: embed_dim must be a positive multiple of num_heads > 0, received "
     "embed_dim=10, num_heads=3"),
    (lambda: layers.TransformerEncoderLayer(8, 2, 16, activation="softmax_with_cross_entropy"),
     "TransformerEncoderLayer: act='softmax_with_cross_entropy' is not a registered unary op"),
    (lambda: layers.TransformerEncoderLayer(8, 2, 0),
     "TransformerEncoderLayer: dim_feedforward must be positive, received 0"),
    (lambda: layers.TransformerEncoder(layers.Linear(8, 8), 2),
     "TransformerEncoder: expected a TransformerEncoderLayer and num_layers >= 1, received "
     "Linear and num_layers=2"),
    (lambda: layers.TransformerEncoderLayer(8, 2, 16, attn_dropout=1.5),
     "Dropout: p must be in [0, 1], received 1.5"),
])
def test_bad_construction_is_refused(make, message):
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        make()


@pytest.mark.parametrize("call, message", [
    (lambda m, x: m(tape.Variable(np.ones((2, 5, 6), np.float32))),
     r"MultiHeadAttention: expected query of shape \(batch, len, 8\), received \(2, 5, 6\)"),
    (lambda m, x: m(x, tape.Variable(np.ones((2, 4, 8), np.float32))),
     r"key and value the length, received query \(2, 5, 8\), key \(2, 4, 8\), value "
     r"\(2, 5, 8\)"),
    (lambda m, x: m(x, attn_mask=np.zeros((3, 5, 5), bool)),
     r"MultiHeadAttention: attn_mask of shape \(3, 5, 5\) does not broadcast to \(batch, "
     r"num_heads, q_len, k_len\) = \(2, 2, 5, 5\)"),
    (lambda m, x: m(x, attn_mask=np.array(["a"])),
     "MultiHeadAttention: attn_mask must be bool, integer or floating, received <U1"),
])
def test_bad_calls_fail_before_any_kernel_runs(call, message, forbid_kernels):
    mha = layers.MultiHeadAttention(8, 2)
    x = tape.Variable(np.ones((2, 5, 8), np.float32))
    for op_type in ("mul", "cast"):
        forbid_kernels(op_type)
    with pytest.raises(InvalidArgumentError, match=message):
        call(mha, x)
