"""Checkpoints: training resumed from one continues bit for bit; files are atomic, pickle-free
and checked; Layer.state_dict / load_state_dict."""
import os
import zipfile

import numpy as np
import pytest

import tape
from tape import checkpoint, layers
from tape.optim.adam import Adam
from tape.optim.clip import clip_grad_norm
from tape.optim.lr_scheduler import CosineAnnealing, LinearWarmup


class MLP(layers.Layer):
    """Two hidden layers in a list, a head, and a persistable buffer (a running input mean)."""

    def __init__(self):
        self.blocks = [layers.Linear(6, 16, act="tanh"), layers.Linear(16, 16, act="relu")]
        self.head = layers.Linear(16, 3)
        self.input_mean = tape.Variable(np.zeros(6, np.float32), name=tape.variable.unique_name(
            "mlp.input_mean"))
        self.input_mean.desc.persistable = True

    def __call__(self, x):
        self.input_mean.value()[...] = 0.9 * self.input_mean.value() + 0.1 * x.value().mean(0)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _batches(count, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, (8, 1)))
            for _ in range(count)]


def _training(seed):
    tape.seed(seed)
    model = MLP()
    opt = Adam(0.01, weight_decay=1e-3)
    sched = LinearWarmup(opt, 3, start_lr=0.001, end_lr=0.01, after=CosineAnnealing(opt, 10))
    return model, opt, sched


def _train(model, opt, sched, batches):
    losses = []
    for x, y in batches:
        tape.reset_global_tape()
        _, loss = tape.ops.softmax_with_cross_entropy(model(tape.Variable(x)), tape.Variable(y))
        loss = tape.ops.mean(loss)
        losses.append(loss.value().copy())
        loss.backward()
        clip_grad_norm(model.params(), 1.0)
        opt(model.params())
        sched.step()
    return np.array(losses)


def _state(model, opt, sched):
    return checkpoint.combine(model=model.state_dict(), optimizer=opt.state_dict(model),
                              scheduler=sched.state_dict())


def test_training_resumed_from_a_checkpoint_continues_bit_for_bit(tmp_path):
    batches = _batches(12)
    model, opt, sched = _training(seed=0)
    _train(model, opt, sched, batches[:5])
    path = tmp_path / "ckpt.npz"
    checkpoint.save(path, _state(model, opt, sched))
    continued = _train(model, opt, sched, batches[5:])

    fresh, fresh_opt, fresh_sched = _training(seed=1)     # other initial values, other names
    assert {p.name for p in fresh.params()}.isdisjoint(p.name for p in model.params())
    parts = checkpoint.split(checkpoint.load(path))
    fresh.load_state_dict(parts["model"])
    fresh_opt.load_state_dict(parts["optimizer"], fresh)
    fresh_sched.load_state_dict(parts["scheduler"])
    resumed = _train(fresh, fresh_opt, fresh_sched, batches[5:])

    np.testing.assert_array_equal(resumed, continued)
    for key, value in _state(model, opt, sched).items():
        np.testing.assert_array_equal(_state(fresh, fresh_opt, fresh_sched)[key], value,
                                      err_msg=key)


def test_state_dict_names_parameters_and_buffers_by_attribute_path():
    model = MLP()
    state = model.state_dict()
    assert list(state) == ["blocks.0.w", "blocks.0.b", "blocks.1.w", "blocks.1.b", "head.w",
                           "head.b", "input_mean"]
    assert state["head.w"].shape == (16, 3)
    state["head.w"][...] = 7.0                       # a copy: the model is untouched
    assert not np.any(model.head.w.value() == 7.0)
    assert model.state_dict(keep_vars=True)["head.w"] is model.head.w


def test_load_state_dict_copies_in_place():
    model, other = MLP(), MLP()
    array = model.head.w.value()
    model.load_state_dict(other.state_dict())
    assert model.head.w.value() is array
    np.testing.assert_array_equal(array, other.head.w.value())


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("head.b"), r"missing key\(s\) 'head.b' \(expected float32 \(3,\)\)"),
    (lambda s: s.update(extra=np.zeros(1)), r"unexpected key\(s\) 'extra'"),
    (lambda s: s.update({"head.w": np.zeros((3, 16), np.float32)}),
     r"'head.w' expected float32 \(16, 3\), received float32 \(3, 16\)"),
    (lambda s: s.update({"input_mean": np.zeros(6, np.float64)}),
     r"'input_mean' expected float32 \(6,\), received float64 \(6,\)")])
def test_load_state_dict_errors_name_the_key(change, message):
    model = MLP()
    state = MLP().state_dict()
    change(state)
    before = model.state_dict()
    with pytest.raises(tape.InvalidArgumentError, match="MLP.load_state_dict: " + message):
        model.load_state_dict(state)
    for key, value in model.state_dict().items():        # checked before anything changed
        np.testing.assert_array_equal(value, before[key])


# ---- the file ----

def test_save_and_load_round_trip(tmp_path):
    state = {"a/b.c": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.arange(3),
             "mask": np.array([True, False]), "step": 7, "rate": 0.125, "file": np.zeros(0),
             "scalar": np.float64(2.5)}
    checkpoint.save(tmp_path / "x.npz", state)
    loaded = checkpoint.load(str(tmp_path / "x.npz"))
    assert list(loaded) == list(state)
    for key, value in state.items():
        np.testing.assert_array_equal(loaded[key], value)
        assert loaded[key].dtype == np.asarray(value).dtype
    assert loaded["step"].shape == () and int(loaded["step"]) == 7
    assert os.listdir(tmp_path) == ["x.npz"]


def test_save_replaces_atomically_and_a_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    checkpoint.save(path, {"w": np.ones(3)})
    checkpoint.save(path, {"w": np.full(3, 2.0)})
    np.testing.assert_array_equal(checkpoint.load(path)["w"], np.full(3, 2.0))
    write_array = np.lib.format.write_array
    calls = []

    def crash_on_second_array(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        write_array(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", crash_on_second_array)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(path, {"w": np.zeros(3), "v": np.zeros(3)})
    monkeypatch.undo()
    np.testing.assert_array_equal(checkpoint.load(path)["w"], np.full(3, 2.0))
    assert os.listdir(tmp_path) == ["ckpt.npz"]       # no temporary file left behind


def test_load_of_a_missing_file(tmp_path):
    with pytest.raises(tape.NotFoundError, match=f"checkpoint {tmp_path / 'nope.npz'}: no such"):
        checkpoint.load(tmp_path / "nope.npz")


def _saved(tmp_path):
    path = tmp_path / "ckpt.npz"
    checkpoint.save(path, {"w": np.arange(1000.0), "b": np.arange(10.0)})
    return path


def test_load_of_a_truncated_file(tmp_path):
    path = _saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(tape.InvalidArgumentError, match=f"checkpoint {path}: cannot be read"):
        checkpoint.load(path)


def test_load_of_a_corrupted_file(tmp_path):
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[400:408] = b"\xff" * 8                        # inside the data of "w"
    path.write_bytes(bytes(data))
    with pytest.raises(tape.InvalidArgumentError, match=f"checkpoint {path}: .*'w'.*CRC"):
        checkpoint.load(path)


def test_load_of_a_file_that_is_not_an_npz(tmp_path):
    path = tmp_path / "notes.npz"
    path.write_text("not a checkpoint")
    with pytest.raises(tape.InvalidArgumentError, match=f"checkpoint {path}: cannot be read"):
        checkpoint.load(path)
    np.save(tmp_path / "one.npy", np.ones(2))
    with pytest.raises(tape.InvalidArgumentError, match="not an .npz archive"):
        checkpoint.load(tmp_path / "one.npy")


def test_load_refuses_pickled_objects(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, w=np.ones(2), payload=np.array([{"code": "x"}], dtype=object))
    assert "payload.npy" in zipfile.ZipFile(path).namelist()
    with pytest.raises(tape.InvalidArgumentError, match="'payload'.*allow_pickle=False"):
        checkpoint.load(path)


@pytest.mark.parametrize("state, message", [
    ({"w": np.array([None], dtype=object)}, "'w' must be a numeric numpy array.* dtype object"),
    ({"w": "text"}, "'w' must be a numeric numpy array, an int or a float, received str"),
    ({3: np.ones(1)}, "names must be non-empty strings, received 3")])
def test_save_refuses_what_cannot_be_loaded_without_pickle(tmp_path, state, message):
    with pytest.raises(tape.InvalidArgumentError, match=message):
        checkpoint.save(tmp_path / "x.npz", state)
    assert os.listdir(tmp_path) == []


def test_split_needs_a_part_prefix():
    assert checkpoint.split(checkpoint.combine(a={"x/y": 1}, b={"z": 2})) == \
        {"a": {"x/y": 1}, "b": {"z": 2}}
    with pytest.raises(tape.InvalidArgumentError, match="'loose' has no '<part>/' prefix"):
        checkpoint.split({"loose": 1})
