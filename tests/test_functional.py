"""tape.functional (issue 11, point 2): each function's forward against numpy (and PyTorch when
installed), its gradients against float64 central differences, losses 0-D."""
import math

import numpy as np
import pytest
from functional_data import LABELS, LOGITS, PROBS, RNG, TARGETS, WEIGHT, V, log_softmax_ref, value
from references.conv import conv2d as conv2d_ref
from references.pool import pool2d as pool2d_ref

import tape
from tape import functional as F
from tape.testing import check_function_grad

# ---- activations, linear, logsumexp ----

def erf(a):
    return np.vectorize(math.erf)(a)


ACTIVATIONS = {
    "relu": (F.relu, lambda a: np.maximum(a, 0)),
    "tanh": (F.tanh, np.tanh),
    "sigmoid": (F.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "gelu": (F.gelu, lambda a: a * 0.5 * (1 + erf(a / np.sqrt(2)))),
    "gelu tanh": (lambda v: F.gelu(v, approximate=True), lambda a: 0.5 * a * (1 + np.tanh(
        np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))),
    "softmax": (F.softmax, lambda a: np.exp(log_softmax_ref(a))),
    "softmax axis 0": (lambda v: F.softmax(v, axis=0), lambda a: np.exp(log_softmax_ref(a, 0))),
    "log_softmax": (F.log_softmax, log_softmax_ref),
    "logsumexp": (F.logsumexp, lambda a: np.log(np.exp(a).sum())),
    "logsumexp axis 1": (lambda v: F.logsumexp(v, 1), lambda a: np.log(np.exp(a).sum(1))),
    "logsumexp keepdim": (lambda v: F.logsumexp(v, [0, 1], keepdim=True),
                          lambda a: np.log(np.exp(a).sum(keepdims=True))),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations(name):
    fn, reference = ACTIVATIONS[name]
    x = np.where(np.abs(LOGITS) < 0.05, 0.1, LOGITS)
    np.testing.assert_allclose(value(fn(V(x))), reference(x), rtol=1e-10, atol=1e-12)
    check_function_grad(fn, x)


def test_logsumexp_does_not_overflow():
    np.testing.assert_allclose(value(F.logsumexp(V(np.array([1000.0, 1000.0])))),
                               1000 + np.log(2))


def test_linear():
    x, w, b = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2)), RNG.standard_normal(2)
    np.testing.assert_allclose(value(F.linear(V(x), V(w), V(b))), x @ w + b, rtol=1e-12)
    np.testing.assert_allclose(value(F.linear(V(x), w)), x @ w, rtol=1e-12)
    check_function_grad(F.linear, x, w, b)


# ---- tensors ----

def test_concat_stack_split():
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    np.testing.assert_array_equal(value(F.concat([V(a), V(b)], axis=1)), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(value(F.stack((V(a), V(b)), axis=2)), np.stack([a, b], 2))
    parts = F.split(V(np.arange(12.0).reshape(6, 2)), 3)
    assert [p.value().tolist() for p in parts] == [r.tolist() for r in np.split(
        np.arange(12.0).reshape(6, 2), 3)]
    assert [p.shape for p in F.split(V(np.ones((6, 2))), [1, -1, 2])] == [(1, 2), (3, 2), (2, 2)]
    check_function_grad(lambda x, y: F.concat([x, y]) * F.stack([x, y]).sum(0).sum(), a, b)
    check_function_grad(lambda x: F.split(x, [2, 1], axis=1)[1] * 2.0, a)


PADS = {
    "constant": ((1, 2), "constant", {}), "constant value": ((0, 1, 2, 0), "constant", {}),
    "reflect": ((2, 1, 1, 1), "reflect", {}), "replicate": ((3, 0, 0, 2), "edge", {}),
    "circular": ((1, 4), "wrap", {}),
}


@pytest.mark.parametrize("name", PADS)
def test_pad_like_numpy(name):
    widths, np_mode, _ = PADS[name]
    mode = name.split()[0]
    x = RNG.standard_normal((2, 3, 4))
    pairs = [(0, 0)] * (3 - len(widths) // 2) + [tuple(widths[i:i + 2]) for i in range(
        len(widths) - 2, -1, -2)]
    value_kw = {"value": 1.5} if name == "constant value" else {}
    want = np.pad(x, pairs, mode=np_mode, **({"constant_values": 1.5} if value_kw else {}))
    np.testing.assert_array_equal(value(F.pad(V(x), widths, mode=mode, **value_kw)), want)
    check_function_grad(lambda v: F.pad(v, widths, mode=mode, **value_kw), x)


def test_pad_rejects_what_it_cannot_do():
    with pytest.raises(tape.InvalidArgumentError, match="pad: "):
        F.pad(V(np.ones((2, 3))), (1,))
    with pytest.raises(tape.InvalidArgumentError, match="cannot be padded"):
        F.pad(V(np.ones((2, 3))), (3, 0), mode="reflect")


def test_one_hot_and_embedding():
    ids = np.array([[0, 2], [3, 1]])
    np.testing.assert_array_equal(value(F.one_hot(ids, 4)), np.eye(4, dtype=np.float32)[ids])
    assert F.one_hot(V(ids), 4).dtype == np.float32
    w = RNG.standard_normal((4, 3))
    np.testing.assert_array_equal(value(F.embedding(ids, V(w))), w[ids])
    padded = value(F.embedding(V(ids), V(w), padding_idx=-1))
    np.testing.assert_array_equal(padded, np.where((ids == 3)[..., None], 0.0, w[ids]))
    check_function_grad(lambda v: F.embedding(ids, v, padding_idx=2), w)


def test_dropout_scales_up_in_training_and_is_identity_otherwise():
    x = V(np.ones((200, 50)), stop_gradient=False)
    assert F.dropout(x, 0.3, training=False) is x and F.dropout(x, 0.0) is x
    y = F.dropout(x, 0.3)
    kept = y.value() != 0
    assert 0.65 < kept.mean() < 0.75
    np.testing.assert_allclose(y.value()[kept], 1 / 0.7)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.value(), kept / 0.7)


# ---- convolution, pooling, normalisation ----

IMAGES = RNG.standard_normal((2, 3, 6, 5))
FILTERS = RNG.standard_normal((4, 3, 3, 2))


@pytest.mark.parametrize("kw, attrs", [
    ({}, {"strides": (1, 1), "paddings": (0, 0), "dilations": (1, 1)}),
    ({"stride": 2, "padding": 1, "dilation": (1, 2)},
     {"strides": (2, 2), "paddings": (1, 1), "dilations": (1, 2)}),
    ({"padding": "same"}, {"strides": (1, 1), "paddings": (0, 0), "dilations": (1, 1),
                           "padding_algorithm": "SAME"}),
])
def test_conv2d(kw, attrs):
    bias = RNG.standard_normal(4)
    want = conv2d_ref(IMAGES, FILTERS, groups=1, **{"padding_algorithm": "EXPLICIT", **attrs})
    got = F.conv2d(V(IMAGES), V(FILTERS), V(bias), **kw)
    np.testing.assert_allclose(value(got), want + bias[:, None, None], rtol=1e-10)
    check_function_grad(lambda x, w, b: F.conv2d(x, w, b, **kw), IMAGES, FILTERS, bias)


@pytest.mark.parametrize("fn, kw, attrs", [
    (F.max_pool2d, {"kernel_size": 2}, {"pooling_type": "max", "ksize": (2, 2),
                                        "strides": (2, 2), "paddings": (0, 0)}),
    (F.avg_pool2d, {"kernel_size": (3, 2), "stride": 1, "padding": 1},
     {"pooling_type": "avg", "ksize": (3, 2), "strides": (1, 1), "paddings": (1, 1)}),
    (F.max_pool2d, {"kernel_size": 2, "ceil_mode": True},
     {"pooling_type": "max", "ksize": (2, 2), "strides": (2, 2), "paddings": (0, 0),
      "ceil_mode": True}),
])
def test_pooling(fn, kw, attrs):
    want = pool2d_ref(IMAGES, **{"global_pooling": False, "exclusive": True, "adaptive": False,
                                 "ceil_mode": False, "padding_algorithm": "EXPLICIT", **attrs})
    np.testing.assert_allclose(value(fn(V(IMAGES), **kw)), want, rtol=1e-12)
    check_function_grad(lambda x: fn(x, **kw), IMAGES)


def test_layer_norm():
    w, b = RNG.standard_normal((6, 5)), RNG.standard_normal((6, 5))
    mean = IMAGES.mean((2, 3), keepdims=True)
    var = IMAGES.var((2, 3), keepdims=True)
    want = (IMAGES - mean) / np.sqrt(var + 1e-5) * w + b
    np.testing.assert_allclose(value(F.layer_norm(V(IMAGES), (6, 5), V(w), V(b))), want,
                               rtol=1e-10)
    check_function_grad(lambda x, p, q: F.layer_norm(x, [6, 5], p, q), IMAGES, w, b)
    np.testing.assert_allclose(value(F.layer_norm(V(IMAGES), 5)),
                               (IMAGES - IMAGES.mean(-1, keepdims=True))
                               / np.sqrt(IMAGES.var(-1, keepdims=True) + 1e-5), rtol=1e-10)


def test_batch_norm_trains_and_updates_the_running_statistics_in_place():
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    mean, var = V(np.zeros(3)), V(np.ones(3))
    y = F.batch_norm(V(IMAGES), mean, var, V(w), V(b), training=True)
    m, v = IMAGES.mean((0, 2, 3)), IMAGES.var((0, 2, 3))
    want = (IMAGES - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5) * w[:, None, None] \
        + b[:, None, None]
    np.testing.assert_allclose(value(y), want, rtol=1e-10)
    np.testing.assert_allclose(mean.value(), 0.1 * m, rtol=1e-10)
    evaluated = F.batch_norm(V(IMAGES), V(m), V(v), training=False)
    np.testing.assert_allclose(value(evaluated), (IMAGES - m[:, None, None])
                               / np.sqrt(v[:, None, None] + 1e-5), rtol=1e-10)
    check_function_grad(lambda x, p, q: F.batch_norm(x, V(np.zeros(3)), V(np.ones(3)), p, q,
                                                     training=True), IMAGES, w, b)


# ---- a traced model of functionals exports and runs ----

def test_functional_model_traces_and_runs_statically():
    w = V(RNG.standard_normal((5, 3)).astype(np.float32), stop_gradient=False)

    def model(x):
        return F.softmax(F.linear(F.relu(x), w) + 1.0)
    x = LOGITS.astype(np.float32)
    program = tape.static.trace(model, x[:1])
    (out,) = tape.static.Executor().run(program, feed={program.feed_names[0]: x},
                                        fetch_list=program.fetch_names)
    with tape.no_grad():
        np.testing.assert_allclose(out, model(V(x)).value(), rtol=1e-6)


# ---- against PyTorch, when installed ----

def test_against_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    t = torch.tensor
    x, y = LOGITS, LABELS
    pairs = [
        (F.cross_entropy(V(x), y, weight=WEIGHT, label_smoothing=0.1),
         tf.cross_entropy(t(x), t(y), weight=t(WEIGHT), label_smoothing=0.1)),
        (F.cross_entropy(V(x), y, ignore_index=2), tf.cross_entropy(t(x), t(y), ignore_index=2)),
        (F.nll_loss(V(x), y, reduction="sum"), tf.nll_loss(t(x), t(y), reduction="sum")),
        (F.binary_cross_entropy(V(PROBS), TARGETS),
         tf.binary_cross_entropy(t(PROBS), t(TARGETS))),
        (F.binary_cross_entropy_with_logits(V(x[:4, :3]), TARGETS, pos_weight=WEIGHT[:3]),
         tf.binary_cross_entropy_with_logits(t(x[:4, :3]), t(TARGETS),
                                             pos_weight=t(WEIGHT[:3]))),
        (F.smooth_l1_loss(V(x[:4, :3]), TARGETS), tf.smooth_l1_loss(t(x[:4, :3]), t(TARGETS))),
        (F.kl_div(V(np.log(PROBS)), TARGETS, reduction="batchmean"),
         tf.kl_div(t(np.log(PROBS)), t(TARGETS), reduction="batchmean")),
        (F.gelu(V(x)), tf.gelu(t(x))), (F.logsumexp(V(x), 1), torch.logsumexp(t(x), 1)),
        (F.pad(V(IMAGES), (1, 2, 2, 1), mode="reflect"),
         tf.pad(t(IMAGES), (1, 2, 2, 1), mode="reflect")),
        (F.conv2d(V(IMAGES), V(FILTERS), stride=(2, 1), padding=1),
         tf.conv2d(t(IMAGES), t(FILTERS), stride=(2, 1), padding=1)),
        (F.avg_pool2d(V(IMAGES), 2, padding=1, exclusive=False),
         tf.avg_pool2d(t(IMAGES), 2, padding=1, count_include_pad=True)),
        (F.max_pool2d(V(IMAGES), 3, 2, 1), tf.max_pool2d(t(IMAGES), 3, 2, 1)),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(value(ours), theirs.numpy(), rtol=1e-10, atol=1e-12)
