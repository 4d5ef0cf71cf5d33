"""tape.functional (issue 11, point 2): each function's forward against numpy (and PyTorch when
installed), its gradients against float64 central differences, losses 0-D."""
import math

import numpy as np
import pytest
from references.conv import conv2d as conv2d_ref
from references.pool import pool2d as pool2d_ref

import tape
from tape import functional as F
from tape.testing import check_function_grad

RNG = np.random.default_rng(0)
V = tape.Variable
LOGITS = RNG.standard_normal((6, 5))
LABELS = np.array([1, 0, 4, 2, 2, 3])
WEIGHT = RNG.uniform(0.5, 2.0, 5)
PROBS = RNG.uniform(0.05, 0.95, (4, 3))
TARGETS = RNG.uniform(0.0, 1.0, (4, 3))


def value(v):
    assert isinstance(v, tape.Variable)
    return v.value()


def log_softmax_ref(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


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


# ---- cross-entropy and friends: a numpy reference with PyTorch's semantics ----

def cross_entropy_ref(logits, label, weight=None, ignore_index=-100, reduction="mean",
                      smoothing=0.0):
    logp = log_softmax_ref(logits)
    n, c = logp.shape
    w = np.ones(c) if weight is None else weight
    valid = label != ignore_index
    ids = np.where(valid, label, 0)
    nll = -logp[np.arange(n), ids] * w[ids]
    smooth = -(logp * w).sum(1)
    loss = ((1 - smoothing) * nll + smoothing / c * smooth) * valid
    if reduction == "mean":
        return loss.sum() / (w[ids] * valid).sum()
    return loss.sum() if reduction == "sum" else loss


CROSS_ENTROPY = {
    "plain": {}, "sum": {"reduction": "sum"}, "none": {"reduction": "none"},
    "weight": {"weight": WEIGHT}, "ignore": {"ignore_index": 2},
    "weight ignore none": {"weight": WEIGHT, "ignore_index": 2, "reduction": "none"},
    "smoothing": {"smoothing": 0.2}, "smoothing weight": {"smoothing": 0.1, "weight": WEIGHT},
}


@pytest.mark.parametrize("name", CROSS_ENTROPY)
def test_cross_entropy(name):
    kw = dict(CROSS_ENTROPY[name])
    smoothing = kw.pop("smoothing", 0.0)
    want = cross_entropy_ref(LOGITS, LABELS, smoothing=smoothing, **kw)

    def loss(x):
        return F.cross_entropy(x, LABELS, label_smoothing=smoothing, **kw)
    got = value(loss(V(LOGITS)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.shape == np.shape(want)
    check_function_grad(loss, LOGITS)


@pytest.mark.parametrize("form", ["(N,)", "(N, 1)", "list", "Variable", "Variable (N, 1)",
                                  "int32"])
def test_cross_entropy_label_forms(form):
    label = {"(N,)": LABELS, "(N, 1)": LABELS[:, None], "list": LABELS.tolist(),
             "Variable": V(LABELS), "Variable (N, 1)": V(LABELS[:, None]),
             "int32": LABELS.astype(np.int32)}[form]
    loss = F.cross_entropy(V(LOGITS.astype(np.float32)), label)
    assert loss.shape == () and loss.dtype == np.float32
    np.testing.assert_allclose(value(loss), cross_entropy_ref(LOGITS, LABELS), rtol=1e-6)


def test_cross_entropy_of_one_example_with_an_int_label_and_on_another_axis():
    np.testing.assert_allclose(value(F.cross_entropy(V(LOGITS[0]), 3)),
                               -log_softmax_ref(LOGITS[0])[3], rtol=1e-12)
    images = RNG.standard_normal((2, 5, 3))     # classes on axis 1, as PyTorch puts them
    label = RNG.integers(0, 5, (2, 3))
    flat = images.transpose(0, 2, 1).reshape(-1, 5)
    np.testing.assert_allclose(value(F.cross_entropy(V(images), label, axis=1)),
                               cross_entropy_ref(flat, label.reshape(-1)), rtol=1e-12)
    none = F.cross_entropy(V(images), label, axis=1, reduction="none")
    assert none.shape == (2, 3)
    check_function_grad(lambda v: F.cross_entropy(v, label, axis=1, weight=WEIGHT), images)


def test_cross_entropy_with_a_label_variable_and_ignored_ids():
    label = V(np.array([1, -100, 4, -100, 2, 3]))
    want = cross_entropy_ref(LOGITS, label.value())
    np.testing.assert_allclose(value(F.cross_entropy(V(LOGITS), label)), want, rtol=1e-12)


def test_cross_entropy_soft_labels():
    soft = np.exp(log_softmax_ref(RNG.standard_normal(LOGITS.shape)))
    want = -(soft * log_softmax_ref(LOGITS)).sum(1).mean()
    np.testing.assert_allclose(value(F.cross_entropy(V(LOGITS), soft, soft_label=True)), want,
                               rtol=1e-12)
    check_function_grad(lambda x, y: F.cross_entropy(x, y, soft_label=True, weight=WEIGHT),
                        LOGITS, soft)


@pytest.mark.parametrize("label, message", [
    (np.array([1, 2]), "shape"), (np.array([0, 1, 2, 3, 4, 5]), "neither a class"),
    (np.ones(6), "int class ids"),
])
def test_cross_entropy_rejects_bad_labels(label, message):
    with pytest.raises(tape.InvalidArgumentError, match=f"cross_entropy: .*{message}"):
        F.cross_entropy(V(LOGITS), label)
    with pytest.raises(tape.InvalidArgumentError, match="reduction must be"):
        F.cross_entropy(V(LOGITS), LABELS, reduction="avg")


def test_nll_loss_pick_and_pick_neg_log_softmax():
    logp = log_softmax_ref(LOGITS)
    np.testing.assert_allclose(value(F.nll_loss(V(logp), LABELS, weight=WEIGHT)),
                               cross_entropy_ref(LOGITS, LABELS, weight=WEIGHT), rtol=1e-12)
    check_function_grad(lambda v: F.nll_loss(v, LABELS, ignore_index=0), logp)
    np.testing.assert_array_equal(value(F.pick(V(LOGITS), LABELS)),
                                  LOGITS[np.arange(6), LABELS])
    np.testing.assert_array_equal(value(F.pick(V(LOGITS), 2)), LOGITS[:, 2])
    np.testing.assert_array_equal(value(F.pick(V(LOGITS), [0, 1, 2, 3, 4], axis=0)),
                                  LOGITS[[0, 1, 2, 3, 4], np.arange(5)])
    np.testing.assert_allclose(value(F.pick_neg_log_softmax(V(LOGITS[0]), 3)), -logp[0, 3])
    np.testing.assert_allclose(value(F.pick_neg_log_softmax(V(LOGITS), V(LABELS))),
                               -logp[np.arange(6), LABELS], rtol=1e-12)
    check_function_grad(lambda v: F.pick(v, LABELS), LOGITS)
    check_function_grad(lambda v: F.pick_neg_log_softmax(v, LABELS), LOGITS)


# ---- elementwise losses ----

def softplus_ref(a):
    return np.log1p(np.exp(-np.abs(a))) + np.maximum(a, 0)


LOSSES = {
    "binary_cross_entropy": (
        lambda p, y: F.binary_cross_entropy(p, y),
        lambda p, y: -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(), PROBS),
    "binary_cross_entropy weight sum": (
        lambda p, y: F.binary_cross_entropy(p, y, weight=WEIGHT[:3], reduction="sum"),
        lambda p, y: -(WEIGHT[:3] * (y * np.log(p) + (1 - y) * np.log(1 - p))).sum(), PROBS),
    "binary_cross_entropy_with_logits": (
        lambda x, y: F.binary_cross_entropy_with_logits(x, y),
        lambda x, y: ((1 - y) * x + softplus_ref(-x)).mean(), LOGITS[:4, :3]),
    "binary_cross_entropy_with_logits pos_weight": (
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=WEIGHT[:3],
                                                        weight=WEIGHT[2:]),
        lambda x, y: (WEIGHT[2:] * ((1 - y) * x + (1 + (WEIGHT[:3] - 1) * y) * softplus_ref(-x))
                      ).mean(), LOGITS[:4, :3]),
    "mse_loss": (F.mse_loss, lambda x, y: ((x - y) ** 2).mean(), LOGITS[:4, :3]),
    "l1_loss none": (lambda x, y: F.l1_loss(x, y, reduction="none"), lambda x, y: np.abs(x - y),
                     LOGITS[:4, :3]),
    "smooth_l1_loss": (F.smooth_l1_loss, lambda x, y: np.where(
        np.abs(x - y) < 1, 0.5 * (x - y) ** 2, np.abs(x - y) - 0.5).mean(), 2 * LOGITS[:4, :3]),
    "smooth_l1_loss delta": (
        lambda x, y: F.smooth_l1_loss(x, y, delta=0.5), lambda x, y: np.where(
            np.abs(x - y) < 0.5, 0.5 * (x - y) ** 2, 0.5 * (np.abs(x - y) - 0.25)).mean(),
        2 * LOGITS[:4, :3]),
    "kl_div": (F.kl_div, lambda x, y: (y * (np.log(y) - x)).mean(), np.log(PROBS)),
    "kl_div batchmean log_target": (
        lambda x, y: F.kl_div(x, y.log(), reduction="batchmean", log_target=True),
        lambda x, y: (y * (np.log(y) - x)).sum() / 4, np.log(PROBS)),
}


@pytest.mark.parametrize("name", LOSSES)
def test_elementwise_losses(name):
    fn, reference, x = LOSSES[name]
    got = fn(V(x), V(TARGETS))
    np.testing.assert_allclose(value(got), reference(x, TARGETS), rtol=1e-10)
    if "none" not in name:
        assert got.shape == ()
    off_kinks = np.where(np.abs(x - TARGETS) < 0.05, TARGETS + 0.1, x)
    check_function_grad(fn, off_kinks, TARGETS)


def test_kl_div_is_zero_where_the_label_is():
    label = np.array([[0.0, 0.5, 0.5]])
    np.testing.assert_allclose(value(F.kl_div(V(np.log(PROBS[:1])), label, reduction="sum")),
                               (label[:, 1:] * (np.log(0.5) - np.log(PROBS[:1, 1:]))).sum())
    check_function_grad(lambda v: F.kl_div(v, label), np.log(PROBS[:1]))


def test_losses_take_numpy_labels_of_the_inputs_dtype():
    loss = F.mse_loss(V(PROBS.astype(np.float32)), TARGETS)
    assert loss.dtype == np.float32 and loss.shape == ()
    with pytest.raises(tape.InvalidArgumentError, match="mse_loss: label of shape"):
        F.mse_loss(V(PROBS), TARGETS[:2])


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
