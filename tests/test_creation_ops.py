"""The creation ops beyond the generic test: shapes only a run knows (ShapeTensor,
ShapeTensorList with -1 placeholders) in eager mode and in programs, the errors, and the ops as
PaddlePaddle's own Python API emits them, run by Tape with Paddle's very attributes and compared
with Paddle's outputs (one Paddle process)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from paddle_ops import needs_paddle

import tape
import tape.static as static
from tape import dtypes
from tape.testing import run_op


def _var(a):
    return tape.Variable(np.asarray(a))


def test_fill_constant_takes_its_shape_from_tensors_and_the_eager_output_is_known():
    out = tape.ops.fill_constant(ShapeTensorList=[_var(np.int32(2)), _var(np.array([3]))],
                                 shape=[-1, 3], dtype=dtypes.FP64, value=1.5)
    assert out.shape == (2, 3) and out.numpy().tolist() == [[1.5] * 3] * 2
    out = tape.ops.fill_constant(ShapeTensor=_var(np.array([4, 1], np.int64)), dtype=dtypes.INT32,
                                 value=7)
    assert out.shape == (4, 1) and out.numpy().dtype == np.int32


@pytest.mark.parametrize("checking", [False, True], ids=["plain", "nan_inf_check"])
def test_an_output_shaped_by_values_gets_its_value_shape(checking, restore_flags):
    """Also on the NaN/Inf check's path, which names the outputs before the kernel runs."""
    tape.set_flags({"FLAGS_check_nan_inf": checking})
    out = tape.ops.range(_var([0.0]), _var([2.0]), _var([0.5]))
    assert out.shape == (4,) and out.numpy().tolist() == [0.0, 0.5, 1.0, 1.5]
    out = tape.ops.fill_constant(ShapeTensorList=[_var(np.int32(1)), _var(np.int32(3))],
                                 shape=[-1, 3], value=2.0)
    assert out.shape == (1, 3)


def test_a_traced_program_keeps_the_sizes_the_tensors_give_unknown():
    def zeros_like_rows(x):
        rows = tape.ops.slice(tape.ops.shape(x), axes=[0], starts=[0], ends=[1],
                              decrease_axis=[0])
        return tape.ops.fill_constant(ShapeTensorList=[rows, tape.ops.fill_any_like(rows, value=2)],
                                      shape=[-1, 2], value=3.0)

    program = static.trace(zeros_like_rows, np.ones((5, 7), np.float32))
    fetched = program.global_block().vars[program.fetch_names[0]]
    assert fetched.shape == (-1, 2)
    for rows in (1, 4):
        out, = static.Executor().run(program, {program.feed_names[0]: np.ones((rows, 7),
                                                                              np.float32)},
                                     program.fetch_names)
        assert out.shape == (rows, 2) and np.all(out == 3.0)


@pytest.mark.parametrize("inputs, attrs, message", [
    ({}, {"shape": [-1, 2]}, "-1 placeholder, which needs the ShapeTensor or ShapeTensorList"),
    ({"ShapeTensorList": [np.float32(2)]}, {}, "ShapeTensorList (tmp"),
    ({"ShapeTensorList": [np.array([1, 2])]}, {}, "must hold one element"),
    ({"ShapeTensorList": [np.int32(2), np.int32(3)]}, {"shape": [2]}, "has 1 dims but input "
     "ShapeTensorList gives 2"),
    ({"ShapeTensor": np.ones((2, 2), np.int32)}, {}, "ShapeTensor must be 1-D"),
])
def test_fill_constant_shape_errors_before_any_kernel(inputs, attrs, message, forbid_kernels):
    forbid_kernels("fill_constant")
    with pytest.raises(tape.InvalidArgumentError) as error:
        run_op("fill_constant", inputs, attrs)
    assert "fill_constant" in str(error.value) and message in str(error.value)


def test_a_size_that_disagrees_with_the_attribute_or_is_negative_is_an_error():
    with pytest.raises(tape.InvalidArgumentError, match="ShapeTensorList gives size 3 for dim 0, "
                                                         "expected 2 .attribute shape."):
        run_op("fill_constant", {"ShapeTensorList": [np.int32(3)]}, {"shape": [2]})
    with pytest.raises(tape.InvalidArgumentError, match="ShapeTensor gives size -2 for dim 1"):
        run_op("fill_constant", {"ShapeTensor": np.array([1, -2])}, {})


@pytest.mark.parametrize("start, end, step", [(0, 3, -1), (3, 0, 1), (1, 5, 0)])
def test_range_needs_a_step_toward_the_end(start, end, step):
    inputs = {"Start": np.array([start]), "End": np.array([end]), "Step": np.array([step])}
    with pytest.raises(tape.InvalidArgumentError, match="range: Step=.* must be nonzero and "
                                                         "point from Start"):
        run_op("range", inputs)


def test_range_of_floats_accumulates_in_its_dtype_as_paddle_does():
    inputs = {k: np.array([v], np.float32) for k, v in (("Start", 0.1), ("End", 2.0),
                                                        ("Step", 0.1))}
    out = run_op("range", inputs)["Out"][0].numpy()
    # ceil((2 - 0.1) / 0.1) in float32: 19 values, each the previous plus 0.1 in float32
    expected = np.add.accumulate(np.r_[np.float32(0.1), np.full(18, np.float32(0.1))],
                                 dtype=np.float32)
    assert out.dtype == np.float32 and np.array_equal(out, expected)


def test_fill_any_like_and_assign_value_errors(forbid_kernels):
    forbid_kernels("fill_any_like")
    with pytest.raises(tape.InvalidArgumentError, match="value 300.0 is out of range for uint8"):
        run_op("fill_any_like", {"X": np.ones(2)}, {"value": 300.0, "dtype": dtypes.UINT8})
    with pytest.raises(tape.InvalidArgumentError, match="assign_value: attribute shape=.2, 2. "
                                                         "must hold the 3 values"):
        run_op("assign_value", {}, {"shape": [2, 2], "values": [1.0, 2.0, 3.0]})


# ---- live PaddlePaddle: its API builds the ops; Tape runs them with Paddle's attributes ----

_PADDLE = """
    import json, sys, numpy as np, paddle
    paddle.enable_static()
    main = paddle.static.Program()
    with paddle.static.program_guard(main, paddle.static.Program()):
        x = paddle.static.data("x", [-1, 3, 2], "float32")
        rows = paddle.shape(x)[0]
        outs = [paddle.full([2, rows, 3], 1.5, "float64"),
                paddle.full(paddle.shape(x), 2, "int64"),
                paddle.zeros([rows, 4], "float32"),
                paddle.full_like(x, 3.0), paddle.full_like(x, 1, "int32"),
                paddle.arange(0, 10, 3, "int64"), paddle.arange(0.5, 2.0, 0.25, "float32"),
                paddle.arange(5, -3, -2, "int32"),
                paddle.assign(np.array([[1.5, -2.0, 3.25]], np.float32)),
                paddle.assign(np.array([[7, -9], [2**40, 0]], np.int64)),
                paddle.assign(np.array([True, False])),
                paddle.assign(np.array([[3, 1]], np.int32))]
    names = {v.name for v in outs} | {"x"}
    ops, fetch = [], []
    for op in main.global_block().ops:
        slots = {k: op.input(k) for k in op.input_names if op.input(k)}
        fetch += [n for names_ in slots.values() for n in names_] + op.output("Out")
        ops.append([op.type, slots, op.output("Out")[0],
                    {k: op.attr(k) for k in op.attr_names if not k.startswith("op_")
                     and k != "with_quant_attr" and k != "values"},
                    [s.value() for s in op.attr("values")] if op.type == "assign_value" else None])
    fetch = list(dict.fromkeys(n for n in fetch if n != "x"))
    exe = paddle.static.Executor(paddle.CPUPlace())
    x_value = np.random.default_rng(0).standard_normal((4, 3, 2)).astype(np.float32)
    values = exe.run(main, feed={"x": x_value}, fetch_list=fetch)
    np.savez(sys.argv[1] + "/values.npz", x=x_value, **dict(zip(fetch, values)))
    json.dump(ops, open(sys.argv[1] + "/ops.json", "w"))
"""


@pytest.fixture(scope="module")
def paddle_ops_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("paddle_creation")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_PADDLE), str(d)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FLAGS_enable_pir_api": "0",
                               "GLOG_minloglevel": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((d / "ops.json").read_text()), np.load(d / "values.npz")


@needs_paddle
def test_tape_runs_the_creation_ops_paddle_emits_as_paddle_does(paddle_ops_run):
    ops, values = paddle_ops_run
    types = {op[0] for op in ops}
    assert {"shape", "slice", "fill_constant", "fill_any_like", "range",
            "assign_value"} <= types, types
    with_tensors = [op for op in ops if op[0] == "fill_constant" and op[1]]
    assert {s for op in with_tensors for s in op[1]} == {"ShapeTensor", "ShapeTensorList"}
    assert any(-1 in op[3]["shape"] for op in with_tensors)
    for op_type, slots, out, attrs, scalars in ops:
        if scalars is not None:
            attrs["values"] = scalars
        inputs = {slot: [values[n] for n in names] if slot == "ShapeTensorList"
                  else values[names[0]] for slot, names in slots.items()}
        got = run_op(op_type, inputs, attrs)["Out"][0].numpy()
        want = values[out]
        assert got.dtype == want.dtype and got.shape == want.shape, (op_type, attrs)
        np.testing.assert_array_equal(got, want, err_msg=f"{op_type} {attrs}")


def test_under_lazy_a_batch_following_zero_state_gives_the_eager_lstm():
    """Under tape.lazy() an op whose size its input values tell runs when it is recorded, so the
    size is known at once; the layers built on it (the LSTM's zero state) compute what they
    compute eagerly, bit for bit (fusion off: its sigmoid and tanh are libm's, which the README
    says may differ in the last bit; tests/lazy_fusion/ checks those)."""
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    tape.set_flags({"FLAGS_lazy_fusion": False})
    try:
        _lazy_lstms_equal_eager(x)
    finally:
        tape.set_flags({"FLAGS_lazy_fusion": True})


def _lazy_lstms_equal_eager(x):
    from tape import layers
    for make in (layers.LSTM, layers.GRU):
        tape.seed(0)
        model = make(3, 4, num_layers=2, direction="bidirect")
        want = model(tape.Variable(x))[0].numpy()
        with tape.lazy():
            zeros = tape.ops.fill_constant(ShapeTensorList=[_var(np.int32(2))], shape=[-1])
            assert zeros.shape == (2,) and not zeros.pending
            got = model(tape.Variable(x))[0].numpy()
            assert zeros.numpy().shape == (2,)
        np.testing.assert_array_equal(got, want)
