"""Comparisons, where and top_k_v2 in a static program: a bool variable traced, saved, reloaded
and fetched with its dtype, gradients appended to the program as eager backward computes them,
and the saved model run by Paddle's own predictor."""
import numpy as np
import pytest
from paddle_runner import needs_paddle, paddle_predict

import tape
import tape.static as static
from tape import dtypes, layers, ops

X = np.random.default_rng(8).standard_normal((6, 5)).astype(np.float32)


def _model(x):
    """A leaky relu made of greater_than and where; the two largest values of each row, zeroed
    where they are below 0.1 (a bool mask cast to floats); and that mask."""
    leaky = ops.where(ops.greater_than(x, ops.scale(x, scale=0.0)), x, ops.scale(x, scale=0.1))
    values, _ = ops.top_k_v2(leaky, k=2)
    mask = ops.greater_equal(values, ops.scale(values, scale=0.0, bias=0.1))
    return ops.elementwise_mul(values, ops.cast(mask, out_dtype=dtypes.FP32)), mask


def _expected(x):
    leaky = np.where(x > 0, x, np.float32(0.1) * x)
    values = -np.sort(-leaky, axis=1)[:, :2]
    return values * (values >= 0.1), values >= 0.1


def test_a_bool_output_is_saved_reloaded_and_fetched_as_bool(tmp_path):
    program = static.trace(_model, X)
    out_name, mask_name = program.fetch_names
    assert program.desc.global_block().vars[mask_name].dtype == dtypes.BOOL
    static.save_inference_model(str(tmp_path), program)
    loaded = static.load_inference_model(str(tmp_path))
    assert loaded.desc.global_block().vars[mask_name].dtype == dtypes.BOOL
    out, mask = static.Executor().run(loaded, {loaded.feed_names[0]: X}, loaded.fetch_names)
    want_out, want_mask = _expected(X)
    assert mask.dtype == np.bool_ and out.dtype == np.float32
    np.testing.assert_array_equal(mask, want_mask)
    np.testing.assert_allclose(out, want_out, rtol=1e-6)
    eager_out, eager_mask = _model(tape.Variable(X))
    np.testing.assert_array_equal(out, eager_out.value())
    np.testing.assert_array_equal(mask, eager_mask.value())


def test_static_backward_through_where_and_top_k_matches_eager():
    tape.seed(1)
    linear = layers.Linear(5, 4)

    def loss_fn(x):
        return ops.mean(_model(linear(x))[0])

    program = static.trace(loss_fn, X)
    params_grads = static.append_backward(program, program.fetch_names[0])
    types = [op.type for op in program.desc.global_block().ops]
    assert "where_grad" in types and "top_k_v2_grad" in types
    grads = static.Executor().run(program, {program.feed_names[0]: X},
                                  [g for _, g in params_grads])
    tape.reset_global_tape()
    loss_fn(tape.Variable(X)).backward()
    by_name = {p.name: p for p in linear.params()}
    for (name, _), grad in zip(params_grads, grads):
        np.testing.assert_array_equal(grad, by_name[name].grad.value())


@needs_paddle
@pytest.mark.parametrize("batch", [6, 2])
def test_paddle_runs_the_saved_model(tmp_path, batch):
    """Traced at 4 rows; served at the batch size of the test."""
    static.save_inference_model(str(tmp_path), static.trace(lambda x: _model(x)[0], X[:4]))
    np.testing.assert_allclose(paddle_predict(tmp_path, X[:batch]), _expected(X[:batch])[0],
                               rtol=1e-6)
