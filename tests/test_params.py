"""The combined parameter file (.pdiparams): byte layout, round trips, bad files, atomic writes,
and the save_combine / load_combine ops."""
import os
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tape
from tape import atomic, dtypes, params
from tape.context import InferShapeContext
from tape.desc import VarDesc
from tape.registry import op_info

PARAMS = {"fc.w": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
          "fc.b": np.array([1.5, -2.0], dtype=np.float64),
          "emb": np.array([[3, -1]], dtype=np.int64),
          "a_scalar": np.array(True)}


def expected_bytes(arrays) -> bytes:
    """The layout of PARAMS_FORMAT.md, by hand: u32 0 | u64 0 | u32 0 | i32 len(desc) | desc |
    data, with desc = 08 <dtype> then 10 <dim> per dim (all values here fit one varint byte)."""
    out = b""
    for a in arrays:
        desc = bytes([0x08, dtypes.from_numpy(a.dtype)]) + b"".join(
            bytes([0x10, d]) for d in a.shape)
        out += struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + a.astype(
            a.dtype.newbyteorder("<")).tobytes()
    return out


def spec(names=None):
    return [(n, PARAMS[n].shape, dtypes.from_numpy(PARAMS[n].dtype))
            for n in (names or sorted(PARAMS))]


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.pdiparams"
    params.save_params(path, PARAMS)
    return path


def test_layout_is_byte_exact_in_sorted_name_order(saved):
    assert saved.read_bytes() == expected_bytes([PARAMS[n] for n in sorted(PARAMS)])


def test_layout_of_paddles_example():
    """fc_0.b_0 of PARAMS_FORMAT.md: FP32 [8] -> desc 08 05 10 08, 20 + 4 bytes of header."""
    header = params.record_header((8,), dtypes.FP32)
    assert header == bytes(12) + b"\x00\x00\x00\x00\x04\x00\x00\x00" + b"\x08\x05\x10\x08"


def test_round_trip(saved):
    loaded = params.load_params(saved, spec())
    assert list(loaded) == sorted(PARAMS)
    for name, value in PARAMS.items():
        assert loaded[name].dtype == value.dtype and np.array_equal(loaded[name], value)
        assert loaded[name].flags.writeable


def test_given_order_and_every_dtype(tmp_path):
    arrays = {f"v{i}": np.arange(6).reshape(2, 3).astype(dtypes.to_numpy(code))
              for i, code in enumerate(dtypes.ALL)}
    arrays["empty"] = np.zeros((0, 3), np.float32)
    order = sorted(arrays, reverse=True)
    assert params.save_params(tmp_path / "p", arrays, order) == order
    assert (tmp_path / "p").read_bytes() == expected_bytes([arrays[n] for n in order])
    got = params.load_combined(tmp_path / "p")
    assert all(np.array_equal(g, arrays[n]) and g.dtype == arrays[n].dtype
               for g, n in zip(got, order))


def test_fp16_on_save_and_on_load(tmp_path):
    params.save_combined(tmp_path / "p", [PARAMS["fc.w"], PARAMS["emb"]], as_fp16=True)
    assert params.read_headers(tmp_path / "p") == [((3, 4), dtypes.FP16), ((1, 2), dtypes.INT64)]
    params.save_combined(tmp_path / "q", [PARAMS["fc.b"]])
    (half,) = params.load_combined(tmp_path / "q", load_as_fp16=True)
    assert half.dtype == np.float16 and np.array_equal(half, PARAMS["fc.b"].astype(np.float16))


# ---- bad files ----

def check_rejects(path, message, expected=None):
    with pytest.raises(tape.InvalidArgumentError, match=message):
        params.load_combined(path, spec() if expected is None else expected)


def test_every_truncation_is_rejected(saved, tmp_path):
    data = saved.read_bytes()
    cut = tmp_path / "cut"
    for n in range(len(data)):
        cut.write_bytes(data[:n])
        check_rejects(cut, "truncated|ends after")


@pytest.mark.parametrize("offset, value, message", [
    (0, b"\x01\x00\x00\x00", "record 0 \\('a_scalar'\\): format version 1, expected 0"),
    (4, b"\x01", "1 LoD levels; LoD tensors are not supported"),
    (12, b"\x07", "tensor version 7"),
    (16, b"\x00\x00\x00\x00", "TensorDesc length 0"),
    (16, b"\xff\xff\xff\x7f", "TensorDesc length 2147483647"),
    (16, b"\xff\xff\xff\xff", "TensorDesc length -1"),
    (20, b"\x08\x16", "data type 22 is not supported"),      # BF16
    (20, b"\x10\x01", "corrupted TensorDesc \\(no data_type\\)"),
    (20, b"\xff\xff", "corrupted TensorDesc"),
])
def test_corrupted_headers_are_rejected(saved, offset, value, message):
    data = bytearray(saved.read_bytes())
    data[offset:offset + len(value)] = value
    saved.write_bytes(bytes(data))
    check_rejects(saved, message)


def test_contradicting_the_program_is_rejected(saved):
    wrong_shape = [(n, (4, 3) if n == "fc.w" else s, d) for n, s, d in spec()]
    check_rejects(saved, r"record 3 \('fc\.w'\): holds float32 \[3, 4\] but the program "
                         r"declares float32 \[4, 3\]", wrong_shape)
    wrong_dtype = [(n, s, dtypes.FP32 if n == "emb" else d) for n, s, d in spec()]
    check_rejects(saved, r"'emb'\): holds int64 \[1, 2\] but the program declares float32",
                  wrong_dtype)
    free_batch = [(n, (-1, 4) if n == "fc.w" else s, d) for n, s, d in spec()]
    assert params.load_params(saved, free_batch)["fc.w"].shape == (3, 4)


def test_record_count_must_match(saved):
    check_rejects(saved, "ends after 4 records, but 5 are expected; the first missing one is "
                         "'zz'", spec() + [("zz", (1,), dtypes.FP32)])
    check_rejects(saved, "more bytes after the 3 records expected", spec()[:3])
    with open(saved, "ab") as f:
        f.write(b"\x00")
    check_rejects(saved, "holds 1 more bytes after the 4 records expected")


def test_absurd_lengths_allocate_nothing(tmp_path):
    desc = b"\x08\x05" + b"\x10\x80\x80\x80\x80\x80\x80\x01" * 2    # float32 [2**42, 2**42]
    path = tmp_path / "huge"
    path.write_bytes(struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + bytes(64))
    tracemalloc.start()
    try:
        with pytest.raises(tape.InvalidArgumentError, match=r"record 0: truncated: float32 "
                                                            r"\[4398046511104, 4398046511104\] "
                                                            r"needs \d+ bytes of data, the file "
                                                            r"holds 64 more"):
            params.load_combined(path)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 1 << 20


def test_not_a_regular_file(tmp_path):
    with pytest.raises(tape.NotFoundError, match="does not exist"):
        params.load_combined(tmp_path / "missing")
    check_rejects(tmp_path, "is not a regular file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    check_rejects(fifo, "is not a regular file")   # opening a FIFO would block


@given(st.binary(max_size=256), st.booleans())
def test_random_bytes_load_or_are_rejected(tmp_path_factory, data, with_spec):
    path = tmp_path_factory.getbasetemp() / "random.pdiparams"
    path.write_bytes(data)
    try:
        params.load_combined(path, spec() if with_spec else None)
    except tape.InvalidArgumentError as e:
        assert "parameter file" in str(e)


def test_unsupported_dtype_is_rejected_on_save(tmp_path):
    with pytest.raises(tape.InvalidArgumentError, match="cannot save an array of dtype "
                                                        "complex64"):
        params.save_combined(tmp_path / "p", [np.zeros(2, np.complex64)])


# ---- atomic writes ----

def test_a_failed_write_leaves_the_old_file_whole(saved):
    before = saved.read_bytes()
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic.atomic_open(saved) as f:
            f.write(b"half of a new file")
            raise RuntimeError("disk on fire")
    # a save that fails on its second array, after writing the first record
    with pytest.raises(tape.InvalidArgumentError):
        params.save_combined(saved, [PARAMS["fc.w"], np.zeros(1, np.complex64)])
    assert saved.read_bytes() == before
    assert os.listdir(saved.parent) == [saved.name]   # no temporary file left


def test_atomic_write_replaces_and_respects_umask(tmp_path):
    path = tmp_path / "sub" / "file"
    atomic.atomic_write(path, b"one")
    atomic.atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~atomic._UMASK
    with pytest.raises(tape.PreconditionNotMetError, match="already exists and overwrite=False"):
        atomic.atomic_write(path, b"three", overwrite=False)
    assert path.read_bytes() == b"two"


# ---- the ops ----

def run(op_type, inputs, attrs):
    return tape.get_global_tape().add_op(op_type, inputs, None, attrs)


def test_save_combine_and_load_combine_ops(tmp_path):
    path = str(tmp_path / "ckpt.pdiparams")
    xs = [tape.Variable(PARAMS[n]) for n in sorted(PARAMS)]
    assert run("save_combine", {"X": xs}, {"file_path": path}) == {}
    assert (tmp_path / "ckpt.pdiparams").read_bytes() == expected_bytes(
        [PARAMS[n] for n in sorted(PARAMS)])
    out = run("load_combine", {}, {"file_path": path})["Out"]
    for v, n in zip(out, sorted(PARAMS)):
        assert v.shape == PARAMS[n].shape and v.dtype == PARAMS[n].dtype
        assert np.array_equal(v.value(), PARAMS[n])
    with pytest.raises(tape.PreconditionNotMetError, match="overwrite=False"):
        run("save_combine", {"X": xs}, {"file_path": path, "overwrite": False})


def test_load_combine_sees_a_rewritten_file(tmp_path):
    """Its output shapes come from the file: no stale answer from the shape cache."""
    path = str(tmp_path / "p")
    params.save_combined(path, [np.zeros((2, 3))])
    assert run("load_combine", {}, {"file_path": path})["Out"][0].shape == (2, 3)
    params.save_combined(path, [np.zeros(5, np.int64), np.ones(1)])
    out = run("load_combine", {}, {"file_path": path})["Out"]
    assert [(v.shape, v.dtype) for v in out] == [((5,), np.int64), ((1,), np.float64)]


@pytest.mark.parametrize("op_type, attr", [("save_combine", "save_to_memory"),
                                           ("load_combine", "model_from_memory")])
def test_memory_modes_are_refused_before_any_kernel(tmp_path, forbid_kernels, op_type, attr):
    forbid_kernels(op_type)
    inputs = {"X": [tape.Variable(np.ones(2))]} if op_type == "save_combine" else {}
    with pytest.raises(tape.InvalidArgumentError, match=f"{op_type}: attribute {attr}=True is "
                                                        f"not supported"):
        run(op_type, inputs, {"file_path": str(tmp_path / "p"), attr: True})


def test_load_combine_reports_a_bad_file_before_any_kernel(tmp_path, forbid_kernels):
    forbid_kernels("load_combine")
    with pytest.raises(tape.NotFoundError, match="load_combine: parameter file .* does not exist"):
        run("load_combine", {}, {"file_path": str(tmp_path / "missing")})
    (tmp_path / "bad").write_bytes(b"\x01" * 30)
    with pytest.raises(tape.InvalidArgumentError, match="load_combine: parameter file .*format "
                                                        "version"):
        run("load_combine", {}, {"file_path": str(tmp_path / "bad")})


class DeclaringContext(InferShapeContext):
    """A shape-rule context that carries pre-declared outputs, as the static Executor will."""

    __slots__ = ("declared",)

    def __init__(self, op_type, attrs, declared):
        super().__init__(op_type, {}, attrs)
        self.declared = declared


def infer_load(path, declared, **attrs):
    info = op_info("load_combine")
    ctx = DeclaringContext("load_combine", info.check_attrs({"file_path": str(path), **attrs}),
                           {"Out": declared})
    info.infer_shape(ctx)
    return ctx.outs["Out"]


def test_load_combine_checks_declared_outputs(saved, tmp_path):
    declared = [VarDesc(n, s, d) for n, s, d in spec()]
    assert infer_load(saved, declared) == [(s, d) for _, s, d in spec()]
    with pytest.raises(tape.InvalidArgumentError, match="more bytes after the 2 records"):
        infer_load(saved, declared[:2])
    declared[1] = VarDesc("emb", (1, 2), dtypes.FP32)
    with pytest.raises(tape.InvalidArgumentError, match=r"load_combine: .*record 1 \('emb'\): "
                                                        r"holds int64 \[1, 2\]"):
        infer_load(saved, declared)
    # not written yet (a program that saves before it loads): the declared shapes stand
    later = [VarDesc("w", (-1, 3)), VarDesc("b", (3,), dtypes.FP64)]
    assert infer_load(tmp_path / "later", later, load_as_fp16=True) == [
        ((-1, 3), dtypes.FP16), ((3,), dtypes.FP16)]
