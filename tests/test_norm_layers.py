"""layers.BatchNorm / LayerNorm / Dropout / Embedding: train vs eval, state, parameters."""
import math
import re

import numpy as np
import pytest

import tape
from tape import layers, optim
from tape.layers.dropout import Dropout
from tape.layers.embedding import Embedding
from tape.layers.norm import BatchNorm, LayerNorm


def _mean_of(y):
    return tape.ops.mean(y)


def _batch_stats(x, axes):
    return x.mean(axis=axes), x.var(axis=axes)


# ---- BatchNorm ----

def test_batch_norm_trains_on_batch_statistics_and_updates_running_ones():
    bn = BatchNorm(3, momentum=0.8, dtype="float64")
    bn.weight.value()[...] = [1.0, 2.0, 0.5]
    bn.bias.value()[...] = [0.0, -1.0, 3.0]
    rng = np.random.default_rng(0)
    mean, variance = np.zeros(3), np.ones(3)
    for step in range(3):
        tape.reset_global_tape()
        x = rng.standard_normal((4, 3, 2, 5)) * (step + 1) + step
        y = bn(tape.Variable(x)).value()
        m, v = _batch_stats(x, (0, 2, 3))
        shape = (1, 3, 1, 1)
        expected = ((x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + 1e-5)
                    * bn.weight.value().reshape(shape) + bn.bias.value().reshape(shape))
        np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-12)
        # Paddle's CPU kernel: the biased batch variance goes into the running variance
        mean, variance = 0.8 * mean + 0.2 * m, 0.8 * variance + 0.2 * v
        np.testing.assert_allclose(bn.mean.value(), mean, rtol=1e-12)
        np.testing.assert_allclose(bn.variance.value(), variance, rtol=1e-12)


def test_batch_norm_eval_uses_and_keeps_the_running_statistics():
    bn = BatchNorm(2, dtype="float64")
    rng = np.random.default_rng(1)
    for _ in range(5):
        tape.reset_global_tape()
        bn(tape.Variable(rng.standard_normal((8, 2)) * 3.0 + 1.0))
    mean, variance = bn.mean.value().copy(), bn.variance.value().copy()
    assert not np.allclose(mean, 0) and not np.allclose(variance, 1)
    bn.eval()
    x = rng.standard_normal((1, 2))     # one sample: fine without batch statistics
    y = bn(tape.Variable(x)).value()
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(variance + 1e-5), rtol=1e-12)
    np.testing.assert_array_equal(bn.mean.value(), mean)
    np.testing.assert_array_equal(bn.variance.value(), variance)
    bn.train()
    with pytest.raises(tape.InvalidArgumentError, match="1 value per channel"):
        bn(tape.Variable(x))


def test_batch_norm_nhwc_and_act():
    bn = BatchNorm(3, act="relu", data_layout="NHWC", dtype="float64")
    x = np.random.default_rng(2).standard_normal((2, 4, 4, 3))
    m, v = _batch_stats(x, (0, 1, 2))
    np.testing.assert_allclose(bn(tape.Variable(x)).value(),
                               np.maximum((x - m) / np.sqrt(v + 1e-5), 0), rtol=1e-10,
                               atol=1e-12)
    assert [op.type for op in tape.get_global_tape()] == ["batch_norm", "relu"]


def test_batch_norm_parameters_buffers_and_names():
    bn = BatchNorm(4)
    prefix = re.fullmatch(r"(batch_norm_\d+)\.w_0", bn.weight.name).group(1)
    assert [p.name for p in bn.params()] == [f"{prefix}.w_0", f"{prefix}.b_0"]
    assert [b.name for b in bn.buffers()] == [f"{prefix}.w_1", f"{prefix}.w_2"]
    np.testing.assert_array_equal(bn.weight.value(), np.ones(4, np.float32))
    np.testing.assert_array_equal(bn.bias.value(), np.zeros(4, np.float32))
    np.testing.assert_array_equal(bn.mean.value(), np.zeros(4, np.float32))
    np.testing.assert_array_equal(bn.variance.value(), np.ones(4, np.float32))
    assert set(bn.state_dict()) == {"weight", "bias", "mean", "variance"}
    x = tape.Variable(np.random.default_rng(3).standard_normal((5, 4, 3)).astype(np.float32))
    _mean_of(bn(x)).backward()
    for b in bn.buffers():
        assert b.desc.persistable and b.stop_gradient and b.grad is None
    assert [p.name for p in bn.params()] == [f"{prefix}.w_0", f"{prefix}.b_0"]
    assert all(p.grad is not None for p in bn.params())


def test_batch_norm_running_statistics_are_the_ops_in_place_outputs():
    bn = BatchNorm(2)
    arrays = [b.value() for b in bn.buffers()]
    bn(tape.Variable(np.random.default_rng(4).standard_normal((3, 2)).astype(np.float32)))
    (op,) = tape.get_global_tape()
    assert [e.name for e in op.inputs["Mean"]] == [e.name for e in op.outputs["MeanOut"]]
    assert [e.name for e in op.inputs["Variance"]] == [e.name for e in op.outputs["VarianceOut"]]
    assert all(b.value() is a for b, a in zip(bn.buffers(), arrays))


def test_batch_norm_rejects_wrong_channels():
    with pytest.raises(tape.InvalidArgumentError, match=r"BatchNorm: expected x .* 3 channels"):
        BatchNorm(3)(tape.Variable(np.ones((2, 4, 5), np.float32)))


def test_a_network_with_batch_norm_and_dropout_learns():
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal((64, 4)) * 5.0 + 3.0
    y_np = (x_np @ np.array([[1.0], [-2.0], [0.5], [3.0]]) > 6.0).astype(np.int64)
    l1 = layers.Linear(4, 32, dtype="float64")
    bn, drop = BatchNorm(32, act="relu", dtype="float64"), Dropout(0.1)
    l2 = layers.Linear(32, 2, dtype="float64")
    sgd = optim.SGD(0.1)
    losses = []
    for _ in range(60):
        tape.reset_global_tape()
        logits = l2(drop(bn(l1(tape.Variable(x_np)))))
        _, loss = tape.ops.softmax_with_cross_entropy(logits, tape.Variable(y_np))
        loss = _mean_of(loss)
        losses.append(float(loss.value()))
        loss.backward()
        sgd(l1.params() + bn.params() + l2.params())
    assert losses[-1] < 0.3 * losses[0]
    for layer in (l1, bn, drop, l2):
        layer.eval()
    tape.reset_global_tape()
    accuracy = np.mean(l2(drop(bn(l1(tape.Variable(x_np))))).value().argmax(1) == y_np[:, 0])
    assert accuracy > 0.9


# ---- LayerNorm ----

@pytest.mark.parametrize("normalized_shape", [5, (3, 5)])
def test_layer_norm_normalises_trailing_axes_in_train_and_eval(normalized_shape):
    ln = LayerNorm(normalized_shape, dtype="float64")
    width = 5 if normalized_shape == 5 else 15
    ln.weight.value()[...] = np.linspace(0.5, 2.0, width)
    ln.bias.value()[...] = np.linspace(-1.0, 1.0, width)
    x = np.random.default_rng(6).standard_normal((2, 3, 5)) * 4.0 + 2.0
    axes = (-1,) if normalized_shape == 5 else (-2, -1)
    m, v = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    expected = ((x - m) / np.sqrt(v + 1e-5) * ln.weight.value().reshape(x.shape[-len(axes):])
                + ln.bias.value().reshape(x.shape[-len(axes):]))
    for mode in ("train", "eval"):
        getattr(ln, mode)()
        np.testing.assert_allclose(ln(tape.Variable(x)).value(), expected, rtol=1e-10)


def test_layer_norm_parameters_and_errors():
    ln = LayerNorm((2, 3))
    prefix = re.fullmatch(r"(layer_norm_\d+)\.w_0", ln.weight.name).group(1)
    assert [p.name for p in ln.params()] == [f"{prefix}.w_0", f"{prefix}.b_0"]
    assert ln.weight.shape == (6,) and np.all(ln.weight.value() == 1)
    assert np.all(ln.bias.value() == 0)
    x = tape.Variable(np.random.default_rng(7).standard_normal((4, 2, 3)).astype(np.float32))
    _mean_of(tape.ops.square(ln(x))).backward()
    assert all(p.grad is not None and p.grad.shape == (6,) for p in ln.params())
    for shape in [(4, 3, 2), (2, 3)]:
        with pytest.raises(tape.InvalidArgumentError, match=r"LayerNorm: expected x"):
            ln(tape.Variable(np.ones(shape, np.float32)))


# ---- Dropout ----

def test_dropout_in_training_drops_about_p_and_upscales():
    tape.seed(0)
    x = np.random.default_rng(8).uniform(1.0, 2.0, (200, 100))
    y = Dropout(0.3)(tape.Variable(x)).value()
    dropped = y == 0
    assert abs(dropped.mean() - 0.3) < 6 * math.sqrt(0.3 * 0.7 / x.size)
    np.testing.assert_allclose(y[~dropped], x[~dropped] / 0.7, rtol=1e-12)


def test_dropout_gradient_follows_the_mask():
    x = tape.Variable(np.ones((50, 40)), stop_gradient=False)
    y = Dropout(0.5)(x)
    _mean_of(y).backward()
    np.testing.assert_allclose(x.grad.value(), y.value() / x.value().size, rtol=1e-12)


def test_dropout_eval_is_identity_or_downgrade():
    x = tape.Variable(np.ones((3, 4), np.float32))
    up = Dropout(0.25).eval()
    assert up(x) is x and len(tape.get_global_tape()) == 0
    down = Dropout(0.25, mode="downgrade_in_infer")
    np.testing.assert_allclose(down.eval()(x).value(), 0.75)
    y = down.train()(x).value()
    assert set(np.unique(y)) <= {0.0, 1.0}       # downgrade_in_infer keeps kept values as is
    assert Dropout(0.0)(x) is x


def test_dropout_masks_repeat_under_tape_seed():
    x = tape.Variable(np.ones((20, 30), np.float32))
    drop = Dropout(0.5)
    tape.seed(42)
    first, second = drop(x).value(), drop(x).value()
    tape.seed(42)
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(drop(x).value(), first)


@pytest.mark.parametrize("p, mode", [(1.5, "upscale_in_train"), (0.5, "drop_some")])
def test_dropout_rejects_bad_arguments(p, mode):
    with pytest.raises(tape.InvalidArgumentError, match="Dropout"):
        Dropout(p, mode)


# ---- Embedding ----

def test_embedding_looks_up_rows_and_scatters_gradients():
    emb = Embedding(6, 3, dtype="float64")
    ids = np.array([[1, 4, 1], [0, 5, 1]])
    y = emb(tape.Variable(ids))
    assert y.shape == (2, 3, 3)
    np.testing.assert_array_equal(y.value(), emb.weight.value()[ids])
    _mean_of(y).backward()
    counts = np.bincount(ids.ravel(), minlength=6)[:, None] * np.ones((1, 3))
    np.testing.assert_allclose(emb.weight.grad.value(), counts / y.value().size, rtol=1e-12)


@pytest.mark.parametrize("padding_idx, row", [(2, 2), (-1, 4)])
def test_embedding_padding_row_is_zero_and_gets_no_gradient(padding_idx, row):
    emb = Embedding(5, 4, padding_idx=padding_idx, dtype="float64")
    assert emb.padding_idx == row
    np.testing.assert_array_equal(emb.weight.value()[row], 0.0)
    emb.weight.value()[row] = 7.0     # even a trained-away zero row looks up as zeros
    ids = np.array([row, 0, row, 1])
    y = emb(tape.Variable(ids))
    np.testing.assert_array_equal(y.value()[[0, 2]], 0.0)
    _mean_of(y).backward()
    grad = emb.weight.grad.value()
    np.testing.assert_array_equal(grad[row], 0.0)
    assert np.all(grad[[0, 1]] > 0)


def test_embedding_initialiser_and_name():
    emb = Embedding(300, 200)
    assert re.fullmatch(r"embedding_\d+\.w_0", emb.weight.name)
    assert emb.params() == [emb.weight] and emb.weight.dtype == np.float32
    w = emb.weight.value()
    limit = math.sqrt(6 / 500)
    assert np.all(np.abs(w) <= limit) and abs(w.std() - limit / math.sqrt(3)) < 0.02 * limit


def test_embedding_rejects_out_of_range_ids_and_padding():
    emb = Embedding(4, 2)
    with pytest.raises(tape.InvalidArgumentError, match=r"Ids holds 7, .*0 <= id < 4"):
        emb(tape.Variable(np.array([1, 7, 2])))
    with pytest.raises(tape.InvalidArgumentError, match=r"Ids holds -1"):
        emb(tape.Variable(np.array([-1])))
    with pytest.raises(tape.InvalidArgumentError, match="padding_idx"):
        Embedding(4, 2, padding_idx=4)
