"""F.cross_entropy's hard-label path: the ops it records (no reshape after Paddle's fused op)
and the same bits as the loss written out with raw ops."""
import numpy as np
import pytest

import tape
from tape import functional as F


@pytest.mark.parametrize("labels_shape", ["(N,)", "(N, 1)"])
def test_numpy_labels_take_the_fused_op_and_the_reduction_only(labels_shape):
    labels = np.array([0, 2, 1, 2])
    if labels_shape == "(N, 1)":
        labels = labels[:, None]
    x = tape.Variable(np.ones((4, 3), np.float32), stop_gradient=False)
    tape.reset_global_tape()
    loss = F.cross_entropy(x, labels)
    assert [op.type for op in tape.get_global_tape()] == ["softmax_with_cross_entropy",
                                                          "reduce_mean"]
    assert loss.shape == ()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_kind", ["numpy", "Variable"])
def test_the_loss_and_its_gradient_are_the_raw_ops_bit_for_bit(reduction, label_kind):
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((16, 7)).astype(np.float32)
    labels = rng.integers(0, 7, 16)
    labels[2] = -100      # ignored

    def gradient(loss_of):
        tape.reset_global_tape()
        x = tape.Variable(logits.copy(), stop_gradient=False)
        loss = loss_of(x)
        (loss.sum() if reduction == "none" else loss).backward()
        return loss.value(), x.grad.value()

    def raw(x):
        _, loss = tape.ops.softmax_with_cross_entropy(
            x, tape.Variable(labels.reshape(-1, 1)), ignore_index=-100)
        loss = tape.ops.reshape2(loss, shape=[-1])
        if reduction == "none":
            return loss
        total = tape.ops.reduce_sum(loss, reduce_all=True)
        if reduction == "sum":
            return total
        return total / tape.Variable(np.array((labels != -100).sum(), np.float32))

    label = labels if label_kind == "numpy" else tape.Variable(labels)
    got = gradient(lambda x: F.cross_entropy(x, label, reduction=reduction))
    want = gradient(raw)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
