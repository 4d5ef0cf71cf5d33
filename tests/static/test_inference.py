"""save_inference_model / load_inference_model: deployable files, checked before writing, and
clear errors for truncated, corrupted or hostile files."""
import os

import numpy as np
import pytest

import tape
import tape.static as static
from tape import layers, params
from tape.desc import FEED_MINIBATCH, FETCH_LIST, ProgramDesc, VarDesc
from tape.optim.sgd import SGD
from tape.static.inference import MODEL_FILE, PARAMS_FILE
from tape.static.program import append_checkpoint

X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


def _model():
    tape.seed(2)
    l1, l2 = layers.Linear(4, 8, act="relu"), layers.Linear(8, 3)
    return lambda x: tape.ops.softmax(l2(l1(x))), l1.params() + l2.params()


def test_a_saved_model_loads_and_gives_the_eager_outputs(tmp_path):
    model, params_ = _model()
    program = static.trace(model, X)
    paths = static.save_inference_model(str(tmp_path), program)
    assert paths == (str(tmp_path / MODEL_FILE), str(tmp_path / PARAMS_FILE))
    loaded = static.load_inference_model(str(tmp_path))
    assert loaded.feed_names == program.feed_names and loaded.fetch_names == program.fetch_names
    (out,) = static.Executor().run(loaded, {loaded.feed_names[0]: X[:3]}, loaded.fetch_names)
    np.testing.assert_array_equal(out, model(tape.Variable(X[:3])).value())
    assert sorted(loaded.scope.local_var_names()) == sorted(p.name for p in params_)


def test_the_saved_model_holds_only_inference_ops_and_the_export_profile(tmp_path):
    def loss_fn(x, label):
        return tape.ops.mean(tape.ops.cross_entropy(model(x), label))
    model, params_ = _model()
    program = static.trace(lambda x, label: (model(x), loss_fn(x, label)), X,
                           np.zeros((5, 1), np.int64))
    probs, loss = program.fetch_names
    SGD(0.1).minimize(loss, program)
    append_checkpoint(program, str(tmp_path / "checkpoint"))
    static.save_inference_model(str(tmp_path), program, ["input_0"], [probs])
    desc = ProgramDesc.parse_from_string((tmp_path / MODEL_FILE).read_bytes())
    block = desc.global_block()
    assert [op.type for op in block.ops] == ["feed", "mul", "elementwise_add", "relu", "mul",
                                             "elementwise_add", "softmax", "fetch"]
    assert not any(op.is_target for op in block.ops)
    assert block.vars["feed"].type == FEED_MINIBATCH and block.vars["fetch"].type == FETCH_LIST
    assert block.vars["input_0"].need_check_feed and block.vars["input_0"].shape == (-1, 4)
    assert desc.version == 3003001 and desc.op_version_map["elementwise_add"] == 1
    persistable = sorted(n for n, d in block.vars.items() if d.persistable)
    assert persistable == sorted([p.name for p in params_] + ["feed", "fetch"])
    stored = params.load_combined(str(tmp_path / PARAMS_FILE))     # sorted-name order
    for array, name in zip(stored, sorted(p.name for p in params_)):
        np.testing.assert_array_equal(array, program.scope.find_var(name).value)


def _bad_program(change):
    program = static.trace(lambda x: tape.ops.relu(x), X)
    change(program.global_block())
    return program


@pytest.mark.parametrize("change, message", [
    (lambda b: setattr(b.vars["feed"], "persistable", False), "'feed' holder"),
    (lambda b: setattr(b.vars["fetch"], "type", 7), "'fetch' holder"),
    (lambda b: b.ops[1].inputs.update(X=["undeclared"]), "uses 'undeclared', which is not"),
    (lambda b: b.ops.pop(1), "reads 'tmp_[0-9]+', which is not fed, not persistable"),
])
def test_what_paddles_loader_would_crash_on_is_refused_before_writing(tmp_path, change,
                                                                      message):
    with pytest.raises(tape.InvalidArgumentError, match=message):
        static.save_inference_model(str(tmp_path), _bad_program(change))
    assert os.listdir(tmp_path) == []


def test_a_parameter_without_a_value_is_refused(tmp_path):
    model, params_ = _model()
    program = static.trace(model, X)
    program.scope.erase([params_[0].name])
    with pytest.raises(tape.NotFoundError, match=f"'{params_[0].name}' has no value"):
        static.save_inference_model(str(tmp_path), program)


def test_a_failed_save_leaves_the_previous_files_whole(tmp_path, monkeypatch):
    model, _ = _model()
    program = static.trace(model, X)
    static.save_inference_model(str(tmp_path), program)
    before = {f: (tmp_path / f).read_bytes() for f in (MODEL_FILE, PARAMS_FILE)}

    def crash(f, arrays, as_fp16=False):
        f.write(b"half a record")
        raise OSError("disk full")
    monkeypatch.setattr(params, "write_tensors", crash)
    with pytest.raises(OSError, match="disk full"):
        static.save_inference_model(str(tmp_path), program)
    assert {f: (tmp_path / f).read_bytes() for f in before} == before
    assert sorted(os.listdir(tmp_path)) == sorted(before)     # no temporary file left


@pytest.fixture
def saved(tmp_path):
    model, _ = _model()
    static.save_inference_model(str(tmp_path), static.trace(model, X))
    return tmp_path


@pytest.mark.parametrize("damage, message", [
    (lambda m: m[:len(m) // 2], "cannot parse a ProgramDesc from"),
    (lambda m: bytes(b ^ 0x5A for b in m), "cannot parse a ProgramDesc from"),
    (lambda m: b"\xff" * 64, "cannot parse a ProgramDesc from 64 bytes"),
    (lambda m: b"", "no block"),
])
def test_a_damaged_model_file_is_a_clear_error(saved, damage, message):
    path = saved / MODEL_FILE
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(tape.InvalidArgumentError, match=f"{MODEL_FILE}: .*{message}"):
        static.load_inference_model(str(saved))


@pytest.mark.parametrize("damage, message", [
    (lambda p: p[:-3], "ends|holds"),
    (lambda p: p + b"\0" * 7, "more bytes"),
    (lambda p: b"", "ends after 0 records"),
])
def test_a_damaged_parameter_file_is_a_clear_error(saved, damage, message):
    path = saved / PARAMS_FILE
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(tape.InvalidArgumentError, match=message):
        static.load_inference_model(str(saved))


def test_missing_files_and_non_regular_files(saved):
    os.remove(saved / PARAMS_FILE)
    with pytest.raises(tape.NotFoundError, match="does not exist"):
        static.load_inference_model(str(saved))
    os.remove(saved / MODEL_FILE)
    os.mkfifo(saved / MODEL_FILE)      # reading a FIFO would block forever
    with pytest.raises(tape.InvalidArgumentError, match="not a regular file"):
        static.load_inference_model(str(saved))


def test_a_well_formed_but_inconsistent_program_is_refused_on_load(saved):
    desc = ProgramDesc.parse_from_string((saved / MODEL_FILE).read_bytes())
    feed = desc.global_block().ops[0]
    del feed.attrs["col"]
    (saved / MODEL_FILE).write_bytes(desc.serialize_to_string())
    with pytest.raises(tape.InvalidArgumentError, match="col numbering"):
        static.load_inference_model(str(saved))
    feed.attrs["col"] = 0
    fetch_holder = desc.global_block().vars.pop("fetch")
    (saved / MODEL_FILE).write_bytes(desc.serialize_to_string())
    with pytest.raises(tape.InvalidArgumentError, match="'fetch' holder"):
        static.load_inference_model(str(saved))
    desc.global_block().add_var(fetch_holder)
    desc.global_block().add_var(VarDesc("unused", (2,), persistable=True))
    (saved / MODEL_FILE).write_bytes(desc.serialize_to_string())
    with pytest.raises(tape.InvalidArgumentError, match="record"):
        static.load_inference_model(str(saved))     # the file lacks 'unused'
