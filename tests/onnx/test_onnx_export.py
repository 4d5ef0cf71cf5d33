"""tape.onnx.export: the example models served by onnxruntime at two batch sizes, what the file
holds (dynamic batch, parameters as initializers, inference semantics), atomic writes, and the
error for an op without a mapping."""
import os
import pathlib
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import tape  # noqa: E402
import tape.onnx  # noqa: E402
from tape import layers  # noqa: E402
from tape.onnx import NoOnnxMappingError  # noqa: E402

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
TOLERANCE = 1e-5    # of the output's scale, max(1, max |output|)
BATCHES = (2, 5)


def _serve(path, *inputs):
    session = ort.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))


def _eager(fn, *inputs):
    with tape.no_grad():
        out = fn(*(tape.Variable(x) for x in inputs))
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _assert_close(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        scale = max(1.0, float(np.max(np.abs(e))))
        assert np.max(np.abs(g - e)) <= TOLERANCE * scale


def _mlp():
    tape.seed(0)
    l1, l2 = layers.Linear(64, 128, act="relu"), layers.Linear(128, 10)
    return lambda x: l2(l1(x)), lambda n: np.random.default_rng(n).normal(
        size=(n, 64)).astype(np.float32)


def _cnn():
    from cnn_digits import SmallCNN
    tape.seed(1)
    return SmallCNN(), lambda n: np.random.default_rng(n).normal(
        size=(n, 1, 8, 8)).astype(np.float32)


def _transformer():
    from transformer_digits import DigitTransformer
    tape.seed(2)
    return DigitTransformer(16, 4), lambda n: np.random.default_rng(n).normal(
        size=(n, 8, 8)).astype(np.float32)


def _char_lstm():
    """The example's layers over a batch of sequences: ids (N, T) -> logits (T, N, vocab)."""
    from char_lstm import CharLSTM
    tape.seed(3)
    model = CharLSTM(20, 8, 16)

    def logits(ids):
        hidden, _ = model.lstm(model.embed(ids).transpose([1, 0, 2]))
        return model.out(hidden)
    return logits, lambda n: np.random.default_rng(n).integers(0, 20, (n, 7))


EXAMPLE_MODELS = {"mlp digits": _mlp, "cnn digits": _cnn, "transformer digits": _transformer,
                  "char lstm": _char_lstm}


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_onnxruntime_serves_the_example_model_at_two_batch_sizes(name, tmp_path):
    model, draw = EXAMPLE_MODELS[name]()
    # traced on one example, as static export is: a batch-sized constant (an LSTM's zero
    # initial state) then broadcasts over any batch
    path = tape.onnx.export(model, tmp_path / "model.onnx", input_spec=[draw(1)])
    if hasattr(model, "eval"):
        model.eval()
    for batch in BATCHES:
        x = draw(batch)
        _assert_close(_serve(path, x), _eager(model, x))


def test_the_file_has_a_dynamic_batch_and_parameters_as_initializers(tmp_path):
    tape.seed(4)
    layer = layers.Linear(3, 2)
    path = tape.onnx.export(layer, tmp_path / "linear.onnx", input_spec=[((None, 3), "float32")])
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    (feed,) = model.graph.input
    assert [d.dim_param or d.dim_value for d in feed.type.tensor_type.shape.dim] == ["batch", 3]
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for p in layer.params():
        np.testing.assert_array_equal(stored[p.name], p.numpy())
    assert model.opset_import[0].version == tape.onnx.DEFAULT_OPSET


def test_dropout_is_off_and_batch_norm_uses_running_statistics(tmp_path):
    """A model in training mode exports as it infers, and is left in training mode."""
    tape.seed(5)
    model = layers.Sequential(layers.Linear(4, 6), layers.BatchNorm(6), layers.Dropout(0.5),
                              layers.Linear(6, 2))
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    model(tape.Variable(x))   # one training step moves the running statistics off 0 and 1
    path = tape.onnx.export(model, tmp_path / "m.onnx", input_spec=[x])
    assert model.training
    inferred = _eager(model.eval(), x)
    _assert_close(_serve(path, x), inferred)
    _assert_close(_serve(path, x[:3]), _eager(model, x[:3]))


def test_a_program_exports_with_its_feeds_and_fetches(tmp_path):
    tape.seed(6)
    layer = layers.Linear(3, 2, act="tanh")
    x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    def fn(v):   # the feed fetched as it is too
        return layer(v), v * 2.0, v
    program = tape.static.trace(fn, x[:1])
    path = tape.onnx.export(program, tmp_path / "p.onnx")
    _assert_close(_serve(path, x), _eager(fn, x))
    with pytest.raises(tape.InvalidArgumentError, match="input_spec lists feed names"):
        tape.onnx.export(program, tmp_path / "q.onnx", input_spec=[x])


def test_an_op_without_a_mapping_is_named_and_nothing_is_written(tmp_path, monkeypatch):
    tape.seed(7)
    layer = layers.Linear(3, 2, act="relu")
    path = tmp_path / "m.onnx"
    path.write_bytes(b"the model before")
    monkeypatch.delitem(tape.onnx.CONVERTERS, "relu")
    with pytest.raises(NoOnnxMappingError, match=r"op 'relu' has no ONNX mapping \(opset 17\)"):
        tape.onnx.export(layer, path, input_spec=[((None, 3), "float32")])
    with pytest.raises(NoOnnxMappingError, match=r"op 'relu' has no ONNX mapping \(opset 13\)"):
        tape.onnx.export(layer, tmp_path / "new.onnx", input_spec=[((None, 3), "float32")],
                         opset_version=13)
    assert path.read_bytes() == b"the model before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_a_mapping_newer_than_the_opset_is_named(tmp_path, monkeypatch):
    relu = tape.onnx.CONVERTERS["relu"]
    monkeypatch.setitem(tape.onnx.CONVERTERS, "relu", type(relu)(relu.fn, since=18))
    layer = layers.Linear(3, 2, act="relu")
    with pytest.raises(NoOnnxMappingError,
                       match=r"op 'relu' has no ONNX mapping at opset 17: its mapping needs "
                             r"opset >= 18"):
        tape.onnx.export(layer, tmp_path / "m.onnx", input_spec=[((None, 3), "float32")])
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("opset", [12, 99])
def test_an_unsupported_opset_is_an_error(tmp_path, opset):
    with pytest.raises(NoOnnxMappingError, match=f"opset {opset} is not supported"):
        tape.onnx.export(layers.Linear(3, 2), tmp_path / "m.onnx",
                         input_spec=[((None, 3), "float32")], opset_version=opset)
    assert not (tmp_path / "m.onnx").exists()


def test_a_layer_needs_an_input_spec(tmp_path):
    with pytest.raises(tape.InvalidArgumentError, match="a layer needs input_spec"):
        tape.onnx.export(layers.Linear(3, 2), tmp_path / "m.onnx")


def test_dims_unknown_besides_the_batch_are_read_at_run_time(tmp_path):
    """reshape2's copied (0) and inferred (-1) dims leave two unknown dims; flattening one of
    them with a known one reads both sizes at run time."""
    def fn(x):
        y = tape.ops.reshape2(x, shape=[0, -1, 2])
        return tape.ops.flatten_contiguous_range(y, start_axis=1, stop_axis=2)
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    program = tape.static.trace(fn, x[:1])
    assert program.global_block().vars[program.fetch_names[0]].shape == (-1, -1)
    path = tape.onnx.export(program, tmp_path / "m.onnx")
    for batch in (1, 3):
        _assert_close(_serve(path, x[:batch]), _eager(fn, x[:batch]))


def test_a_reshape_to_two_unknown_dims_is_named(tmp_path):
    w = np.ones((2, 3), np.float32)

    def fn(x):
        y = tape.ops.reshape2(x, shape=[0, -1, 2])
        return tape.ops.mul(y, tape.Variable(w), x_num_col_dims=2)
    program = tape.static.trace(fn, np.ones((1, 8), np.float32))
    with pytest.raises(NoOnnxMappingError, match=r"op 'mul' reshapes to \[-1, -1, 3\], with "
                                                 r"more than one unknown dim.* \(opset 17\)"):
        tape.onnx.export(program, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_an_op_has_one_mapping():
    with pytest.raises(tape.InvalidArgumentError, match="op 'relu' already has a converter"):
        tape.onnx.converts("relu")(lambda c: None)
    assert tape.onnx.CONVERTERS["relu"].fn.__name__ == "unary"
