"""tape.functional's losses (issue 11, point 2): cross-entropy and its label forms, nll/pick,
and the elementwise losses, forward against numpy references with PyTorch's semantics,
gradients against float64 central differences, losses 0-D."""
import numpy as np
import pytest
from functional_data import LABELS, LOGITS, PROBS, RNG, TARGETS, WEIGHT, V, log_softmax_ref, value

import tape
from tape import functional as F
from tape.testing import check_function_grad

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
