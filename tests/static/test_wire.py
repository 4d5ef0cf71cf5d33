"""ProgramDesc on the wire: Paddle's field numbers, round trips, attribute types, bad bytes, and
(when PaddlePaddle is installed) Paddle loading what Tape writes and Tape reading what Paddle
writes."""
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from paddle_runner import needs_paddle, paddle_predict

import tape
from tape import desc as D
from tape import framework_pb2 as pb
from tape import params
from tape import wire as W
from tape.attribute import BLOCK, BLOCKS, BOOLEANS, FLOATS, INT, INTS, LONG, LONGS, STRINGS

SHARED = pathlib.Path(__file__).resolve().parents[3] / "shared" / "reference" / "paddle"


def mlp_program():
    """feed x -> mul -> elementwise_add -> softmax -> fetch, in the export profile."""
    p = D.ProgramDesc()
    b = p.global_block()
    b.add_var(D.VarDesc("feed", persistable=True, type=D.FEED_MINIBATCH))
    b.add_var(D.VarDesc("fetch", persistable=True, type=D.FETCH_LIST))
    b.add_var(D.VarDesc("x", (-1, 4), need_check_feed=True))
    b.add_var(D.VarDesc("w", (4, 3), persistable=True, stop_gradient=False))
    b.add_var(D.VarDesc("b", (3,), persistable=True, stop_gradient=False))
    for name in ("t0", "t1", "out"):
        b.add_var(D.VarDesc(name, (-1, 3)))
    b.append_op(D.OpDesc("feed", {"X": ["feed"]}, {"Out": ["x"]}, {"col": 0}))
    b.append_op(D.OpDesc("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["t0"]},
                         {"x_num_col_dims": 1, "y_num_col_dims": 1}))
    b.append_op(D.OpDesc("elementwise_add", {"X": ["t0"], "Y": ["b"]}, {"Out": ["t1"]},
                         {"axis": 1}))
    b.append_op(D.OpDesc("softmax", {"X": ["t1"]}, {"Out": ["out"]}, {"axis": -1}))
    b.append_op(D.OpDesc("fetch", {"X": ["out"]}, {"Out": ["fetch"]}, {"col": 0}))
    return p.set_paddle_versions()


# ---- the schema: Paddle's numbers ----

FIELDS = {  # message: {field: number}, from SCHEMA.md
    pb.OpDesc: {"inputs": 1, "outputs": 2, "type": 3, "attrs": 4, "is_target": 5},
    pb.OpDesc.Var: {"parameter": 1, "arguments": 2},
    pb.OpDesc.Attr: {"name": 1, "type": 2, "i": 3, "f": 4, "s": 5, "ints": 6, "floats": 7,
                     "strings": 8, "b": 10, "bools": 11, "block_idx": 12, "l": 13,
                     "blocks_idx": 14, "longs": 15, "float64s": 16, "var_name": 17,
                     "vars_name": 18, "float64": 19, "scalar": 20, "scalars": 21},
    pb.VarType: {"type": 1, "selected_rows": 2, "dense_tensor": 3, "tensor_array": 4,
                 "reader": 5, "tuple": 7, "string": 8, "strings": 9, "vocab": 10,
                 "sparse_coo": 11, "sparse_csr": 12},
    pb.VarType.TensorDesc: {"data_type": 1, "dims": 2},
    pb.VarType.DenseTensorDesc: {"tensor": 1, "legacy_lod_level": 2},
    pb.VarDesc: {"name": 1, "type": 2, "persistable": 3, "need_check_feed": 4,
                 "is_parameter": 5, "stop_gradient": 6, "attrs": 7},
    pb.BlockDesc: {"idx": 1, "parent_idx": 2, "vars": 3, "ops": 4, "forward_block_idx": 5},
    pb.OpVersionMap.OpVersionPair: {"op_name": 1, "op_version": 2},
    pb.ProgramDesc: {"blocks": 1, "version": 4, "op_version_map": 5},
    pb.Scalar: {"type": 1, "b": 2, "i": 3, "r": 4, "c": 5},
}


@pytest.mark.parametrize("message", FIELDS, ids=lambda m: m.DESCRIPTOR.full_name)
def test_field_numbers_are_paddles(message):
    fields = message.DESCRIPTOR.fields_by_name
    assert {name: f.number for name, f in fields.items()} == FIELDS[message]


REQUIRED = {  # proto2 required fields, from SCHEMA.md
    pb.OpDesc: {"type"}, pb.OpDesc.Var: {"parameter"}, pb.OpDesc.Attr: {"name", "type"},
    pb.VarType: {"type"}, pb.VarType.TensorDesc: {"data_type"},
    pb.VarType.DenseTensorDesc: {"tensor"}, pb.VarDesc: {"name", "type"},
    pb.BlockDesc: {"idx", "parent_idx"}, pb.OpVersionMap.OpVersionPair: {"op_name", "op_version"},
    pb.ProgramDesc: set(), pb.Scalar: {"type"},
}


@pytest.mark.parametrize("message", FIELDS, ids=lambda m: m.DESCRIPTOR.full_name)
def test_required_fields_are_paddles(message):
    fields = message.DESCRIPTOR.fields_by_name
    assert {name for name, f in fields.items() if f.is_required} == REQUIRED[message]


def test_enum_values_and_removed_items():
    assert 3 not in pb.ProgramDesc.DESCRIPTOR.fields_by_number
    assert 16 not in pb.VarType.Type.DESCRIPTOR.values_by_number
    assert pb.DESCRIPTOR.package == "paddle.framework.proto"
    types = pb.VarType.Type
    assert (types.DENSE_TENSOR, types.FEED_MINIBATCH, types.FETCH_LIST, types.FP32,
            types.UINT16) == (7, 9, 10, 5, 36)
    assert (pb.INT, pb.LONGS, pb.FLOAT64S, pb.SCALARS) == (0, 11, 12, 17)
    assert pb.BlockDesc().forward_block_idx == -1
    dims = pb.VarType.TensorDesc.DESCRIPTOR.fields_by_name["dims"]
    assert not dims.is_packed   # Paddle writes dims unpacked


def test_op_bytes_by_hand():
    """``type`` is field 3 yet written after inputs (1) and outputs (2), as Paddle does."""
    op = D.OpDesc("relu", {"X": ["a"]}, {"Out": ["b"]}).to_proto().SerializeToString()
    assert op == (b"\x0a\x06" + b"\x0a\x01X" + b"\x12\x01a"
                  + b"\x12\x08" + b"\x0a\x03Out" + b"\x12\x01b" + b"\x1a\x04relu")


def test_import_tape_does_not_import_protobuf():
    code = "import sys, tape; print('google.protobuf' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# ---- the export profile, read back with the generated module ----

def test_program_bytes_follow_the_export_profile():
    m = pb.ProgramDesc()
    m.ParseFromString(mlp_program().serialize_to_string())
    assert m.IsInitialized() and m.version.version == 3003001
    versions = {p.op_name: p.op_version.version for p in m.op_version_map.pair}
    assert versions["elementwise_add"] == 1 and versions["fill_constant"] == 2
    block = m.blocks[0]
    assert (block.idx, block.parent_idx) == (0, -1)
    var = {v.name: v for v in block.vars}
    assert var["feed"].type.type == pb.VarType.FEED_MINIBATCH and var["feed"].persistable
    assert var["fetch"].type.type == pb.VarType.FETCH_LIST and var["fetch"].persistable
    x = var["x"]
    assert x.need_check_feed and not x.persistable
    assert list(x.type.dense_tensor.tensor.dims) == [-1, 4]
    assert x.type.dense_tensor.tensor.data_type == pb.VarType.FP32
    assert x.type.dense_tensor.HasField("legacy_lod_level")
    assert var["w"].persistable and not var["w"].stop_gradient
    ops = [op.type for op in block.ops]
    assert ops == ["feed", "mul", "elementwise_add", "softmax", "fetch"]
    attrs = {a.name: a for a in block.ops[1].attrs}
    assert attrs["x_num_col_dims"].type == pb.INT and attrs["x_num_col_dims"].i == 1
    assert [a.name for a in block.ops[0].attrs] == ["col"] and block.ops[0].attrs[0].type == INT


def test_registered_ops_use_their_declared_attribute_types():
    fill = D.OpDesc("fill_constant", {}, {"Out": ["o"]},
                    tape.registry.op_info("fill_constant").check_attrs({"shape": [2, 3]}))
    attrs = {a.name: a for a in fill.to_proto().attrs}
    assert attrs["shape"].type == LONGS and list(attrs["shape"].longs) == [2, 3]
    assert attrs["dtype"].type == INT and attrs["dtype"].i == 5
    assert [a.name for a in fill.to_proto().attrs] == sorted(attrs)


@pytest.mark.parametrize("value, kind", [
    (3, INT), (2**40, LONG), (True, pb.BOOLEAN), (0.5, pb.FLOAT), ("s", pb.STRING),
    ([1, 2], INTS), ([1, 2**40], LONGS), ([0.5, 1], FLOATS), (["a"], STRINGS),
    ([True], BOOLEANS), ((), INTS)])
def test_unregistered_ops_infer_attribute_types(value, kind):
    op = D.OpDesc("my_custom_op", attrs={"a": value})
    assert op.attr_type("a") == kind
    assert op.to_proto().attrs[0].type == kind


def test_common_paddle_attributes_have_paddles_types():
    op = D.OpDesc("my_custom_op", attrs={"op_role_var": (), "op_role": 0})
    assert op.attr_type("op_role_var") == STRINGS and op.attr_type("op_role") == INT


@pytest.mark.parametrize("op_type, attrs, message", [
    ("mul", {"x_num_col_dims": "one"}, "'x_num_col_dims' (INT) cannot hold 'one'"),
    ("my_custom_op", {"a": {"no": "dict"}}, "cannot tell the wire type of attribute 'a'"),
    ("my_custom_op", {"a": 2**70}, "'a' (LONG) cannot hold"),
])
def test_attributes_that_do_not_fit_their_type(op_type, attrs, message):
    with pytest.raises(tape.InvalidArgumentError, match=re.escape(message)):
        D.OpDesc(op_type, attrs=attrs).to_proto()


# ---- round trips ----

EVERY_ATTR = {  # name: (AttrType, value as parsing returns it)
    "i": (INT, -7), "f": (pb.FLOAT, 0.5), "s": (pb.STRING, "text"), "ints": (INTS, (1, -2)),
    "floats": (FLOATS, (0.25, -1.5)), "strings": (STRINGS, ("a", "b")),
    "b": (pb.BOOLEAN, True), "bools": (BOOLEANS, (True, False)), "block": (BLOCK, 1),
    "l": (LONG, 2**40), "blocks": (BLOCKS, (0, 1)), "longs": (LONGS, (2**40, -1)),
    "float64s": (W.FLOAT64S, (0.1, 1e300)), "var": (W.VAR, "x"), "vars": (W.VARS, ("x", "w")),
    "float64": (W.FLOAT64, 0.1), "scalar": (W.SCALAR, 2.5),
    "scalars": (W.SCALARS, (True, 3, 0.1, 1 + 2j)),
}


def rich_program():
    p = mlp_program()
    sub = D.BlockDesc(1, 0, forward_block_idx=0)
    sub.add_var(D.VarDesc("arr", (2, -1), tape.dtypes.INT64, type=D.DENSE_TENSOR_ARRAY))
    sub.add_var(D.VarDesc("rows", (5, 3), type=D.SELECTED_ROWS))
    sub.add_var(D.VarDesc("scalar", (), tape.dtypes.BOOL))
    sub.append_op(D.OpDesc("my_custom_op", {"X": ["arr", "rows"], "Empty": []}, {"Out": ["t"]},
                           {k: v for k, (_, v) in EVERY_ATTR.items()}, is_target=True,
                           attr_types={k: t for k, (t, _) in EVERY_ATTR.items()}))
    p.blocks.append(sub)
    return p


def snapshot(p):
    """Everything a ProgramDesc holds, as plain data."""
    return (p.version, p.op_version_map, [
        (b.idx, b.parent_idx, b.forward_block_idx,
         [(v.name, v.shape, v.dtype, v.persistable, v.stop_gradient, v.type, v.need_check_feed)
          for v in b.vars.values()],
         [(o.type, o.inputs, o.outputs, o.attrs, o.is_target) for o in b.ops])
        for b in p.blocks])


def test_round_trip_keeps_everything():
    p = rich_program()
    data = p.serialize_to_string()
    back = D.ProgramDesc.parse_from_string(data)
    assert snapshot(back) == snapshot(p)
    assert back.serialize_to_string() == data
    assert back.blocks[1].ops[0].attr_types == {k: t for k, (t, _) in EVERY_ATTR.items()}


def test_float_attributes_travel_as_float32():
    op = D.OpDesc("scale", attrs={"scale": 0.1})
    back = D.OpDesc.from_proto(op.to_proto())
    assert back.attrs["scale"] == float(np.float32(0.1))


def test_paddle_written_program_parses():
    text = SHARED / "mlp_program.txt"
    if not text.exists():
        pytest.skip(f"{text} is not there (the shared reference sits beside the repo)")
    from google.protobuf import text_format
    m = text_format.Parse(text.read_text(), pb.ProgramDesc())
    p = D.ProgramDesc.parse_from_string(m.SerializeToString())
    block = p.global_block()
    assert [op.type for op in block.ops] == ["feed", "mul", "elementwise_add", "relu", "mul",
                                             "elementwise_add", "softmax", "fetch"]
    assert block.vars["fc_0.w_0"].shape == (4, 8) and block.vars["fc_0.w_0"].persistable
    assert block.vars["x"].shape == (-1, 4) and block.vars["x"].need_check_feed
    assert block.ops[0].attrs["op_callstack"] == () and block.ops[2].attrs["axis"] == 1
    assert p.version == 3003001 and len(p.op_version_map) == 76
    assert D.ProgramDesc.parse_from_string(p.serialize_to_string()).serialize_to_string() \
        == p.serialize_to_string()


def test_str_has_a_header_per_block_and_a_line_per_op():
    p = mlp_program()
    p.global_block().ops[1].attrs["op_callstack"] = ("a long python stack",)
    lines = str(p).splitlines()
    assert lines[0] == "program (version 3003001, 76 op versions)"
    assert lines[1] == "block 0 (parent -1): 8 vars, 5 ops"
    assert "  var x: float32[-1, 4] need_check_feed" in lines
    assert "  var feed: FEED_MINIBATCH persistable" in lines
    assert "  Out=[t0] = mul(X=[x], Y=[w])  {x_num_col_dims=1, y_num_col_dims=1}" in lines
    assert "op_callstack" not in str(p)


# ---- bad bytes ----

def corrupt(message):
    return D.ProgramDesc.parse_from_string(message.SerializePartialToString())


def valid_message():
    return rich_program().to_proto()


DAMAGES = {  # id: (damage to a valid message, what the error says)
    "no-op-type": (lambda m: m.blocks[0].ops[1].ClearField("type"),
                   r"required field.*blocks\[0\]\.ops\[1\]\.type"),
    "no-blocks": (lambda m: m.ClearField("blocks"), "has no block"),
    "block-idx": (lambda m: setattr(m.blocks[1], "idx", 5), "block #1 says idx 5"),
    "parent-range": (lambda m: setattr(m.blocks[1], "parent_idx", 7), "parent_idx 7"),
    "global-parent": (lambda m: setattr(m.blocks[0], "parent_idx", 1), "parent_idx 1"),
    "forward-block": (lambda m: setattr(m.blocks[1], "forward_block_idx", 9),
                      "forward_block_idx 9"),
    "var-twice": (lambda m: m.blocks[0].vars.append(m.blocks[0].vars[0]),
                  "'feed' is declared twice"),
    "lod": (lambda m: setattr(m.blocks[0].vars[2].type.dense_tensor, "legacy_lod_level", 1),
            "LoD"),
    "kind-as-dtype": (lambda m: setattr(m.blocks[0].vars[2].type.dense_tensor.tensor,
                                        "data_type", 7), "not an element type"),
    "no-tensor-desc": (lambda m: m.blocks[0].vars[2].type.ClearField("dense_tensor"),
                       "needs its 'dense_tensor' description"),
    "attr-twice": (lambda m: m.blocks[0].ops[1].attrs.append(m.blocks[0].ops[1].attrs[0]),
                   "attribute 'x_num_col_dims' appears twice"),
    "slot-twice": (lambda m: m.blocks[0].ops[1].inputs.append(m.blocks[0].ops[1].inputs[0]),
                   "input slot 'X' appears twice"),
    "block-attr": (lambda m: setattr(m.blocks[1].ops[0].attrs[1], "block_idx", 2),
                   "attribute 'block' refers to block"),
}


@pytest.mark.parametrize("damage, message", DAMAGES.values(), ids=DAMAGES.keys())
def test_inconsistent_programs_are_rejected(damage, message):
    m = valid_message()
    damage(m)
    with pytest.raises(tape.InvalidArgumentError, match=message):
        corrupt(m)


def test_a_negative_dim_reads_as_unknown():
    """Paddle saves products of -1 and known sides (-24, -C) where a side is unknown."""
    m = valid_message()
    m.blocks[0].vars[2].type.dense_tensor.tensor.dims.extend([-24, 3])
    x = corrupt(m).global_block().vars["x"]
    assert x.shape == (-1, 4, -1, 3)


def parses_or_rejects(data: bytes) -> None:
    """Either a ProgramDesc or InvalidArgumentError: nothing else, ever."""
    try:
        D.ProgramDesc.parse_from_string(data)
    except tape.InvalidArgumentError as e:
        assert str(e)


def test_every_truncation_parses_or_is_rejected():
    data = rich_program().serialize_to_string()
    for n in range(len(data)):
        parses_or_rejects(data[:n])
    with pytest.raises(tape.InvalidArgumentError, match="truncated, corrupted"):
        D.ProgramDesc.parse_from_string(data[:len(data) // 2])


@given(st.binary(max_size=512))
def test_random_bytes_parse_or_are_rejected(data):
    parses_or_rejects(data)


@given(st.data())
def test_flipped_bytes_parse_or_are_rejected(data):
    original = bytearray(mlp_program().serialize_to_string())
    for _ in range(data.draw(st.integers(1, 4))):
        original[data.draw(st.integers(0, len(original) - 1))] = data.draw(st.integers(0, 255))
    parses_or_rejects(bytes(original))


@pytest.mark.parametrize("data", [
    b"\x0a\xff\xff\xff\xff\x0f",                 # a block claiming 4 GiB
    b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # an overlong varint
    b"\x0b" * 100_000,                           # 100k nested groups
    b"\x0a\x02\x0a" * 30_000,                    # deep nesting through lengths
    b"",                                         # nothing at all
])
def test_hostile_bytes_are_rejected(data):
    with pytest.raises(tape.InvalidArgumentError):
        D.ProgramDesc.parse_from_string(data)


def test_parse_wants_bytes():
    with pytest.raises(tape.InvalidArgumentError, match="expects bytes, received str"):
        D.ProgramDesc.parse_from_string("not bytes")


# ---- real PaddlePaddle ----

@needs_paddle
def test_paddle_inference_runs_a_tape_program(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    (tmp_path / "model.pdmodel").write_bytes(mlp_program().serialize_to_string())
    params.save_params(tmp_path / "model.pdiparams", {"w": w, "b": b})
    z = x.astype(np.float64) @ w + b
    expected = np.exp(z - z.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(paddle_predict(tmp_path, x), expected, rtol=0, atol=1e-6)
