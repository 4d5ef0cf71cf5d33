"""tape.static.trace and Tape.to_program: a recorded tape becomes a Program."""
import inspect

import numpy as np
import pytest

import tape
import tape.static as static
from tape import layers
from tape.desc import FEED_MINIBATCH, FETCH_LIST
from tape.registry import op_info

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4)).astype(np.float32)


def _mlp():
    tape.seed(1)
    return layers.Linear(4, 6, act="relu"), layers.Linear(6, 3)


def _eager(model, x):
    l1, l2 = model
    return tape.ops.softmax(l2(l1(tape.Variable(x)))).value()


def test_trace_writes_feed_ops_recorded_ops_and_fetch_ops():
    l1, l2 = model = _mlp()
    program = static.trace(lambda x: tape.ops.softmax(l2(l1(x))), X)
    block = program.global_block()
    assert [op.type for op in block.ops] == ["feed", "mul", "elementwise_add", "relu", "mul",
                                             "elementwise_add", "softmax", "fetch"]
    feed, fetch = block.ops[0], block.ops[-1]
    assert feed.inputs == {"X": ["feed"]} and feed.output("Out") == program.feed_names
    assert feed.attrs["col"] == 0 and fetch.attrs["col"] == 0
    assert fetch.outputs == {"Out": ["fetch"]} and fetch.input("X") == program.fetch_names
    for op in block.ops:
        assert set(op_info(op.type).attrs) <= set(op.attrs), op    # every proto attribute
        for name in op.input_arg_names() + op.output_arg_names():
            assert name in block.vars, name
    assert block.vars["feed"].type == FEED_MINIBATCH and block.vars["feed"].persistable
    assert block.vars["fetch"].type == FETCH_LIST and block.vars["fetch"].persistable
    assert program.desc.version == 3003001
    assert program.desc.op_version_map["elementwise_add"] == 1
    (out,) = static.Executor().run(program, {program.feed_names[0]: X[:2]},
                                   program.fetch_names)
    np.testing.assert_array_equal(out, _eager(model, X[:2]))


def test_batch_dimension_is_unknown_for_feeds_and_what_derives_from_them():
    l1, l2 = _mlp()
    program = static.trace(lambda x: tape.ops.mean(l2(l1(x))), X)
    block = program.global_block()
    (loss,) = program.fetch_names
    for name, d in block.vars.items():
        if not d.persistable:
            assert d.shape == (() if name == loss else (-1, *d.shape[1:])), d
    assert block.vars[program.feed_names[0]].shape == (-1, 4)
    assert [d.shape for d in map(block.vars.get, (l1.w.name, l2.b.name))] == [(4, 6), (3,)]


def test_parameters_are_persistable_with_a_copy_of_their_values_in_the_scope():
    l1, l2 = _mlp()
    program = static.trace(lambda x: l2(l1(x)), X)
    block = program.global_block()
    params = l1.params() + l2.params()
    persistable = {n for n, d in block.vars.items() if d.persistable}
    assert persistable == {p.name for p in params} | {"feed", "fetch"}
    for p in params:
        held = program.scope.find_var(p.name).value
        np.testing.assert_array_equal(held, p.value())
        assert held is not p.value()        # later eager training does not change the program
    assert not block.vars[program.feed_names[0]].persistable


def test_constants_made_inside_the_function_become_persistable_values():
    def fn(x):
        return x * tape.Variable(np.full((4,), 3.0, np.float32), name="three")
    program = static.trace(fn, X)
    assert program.global_block().vars["three"].persistable
    (out,) = static.Executor().run(program, {"input_0": X}, program.fetch_names)
    np.testing.assert_array_equal(out, X * 3)


def test_several_outputs_become_fetch_ops_in_order():
    x = tape.Variable(X, name="features")
    program = static.trace(lambda x: (tape.ops.relu(x), tape.ops.tanh(x)), x)
    fetches = [op for op in program.global_block().ops if op.type == "fetch"]
    assert [op.attrs["col"] for op in fetches] == [0, 1]
    assert program.feed_names == ["features"]
    relu, tanh = static.Executor().run(program, {"features": X}, program.fetch_names)
    np.testing.assert_array_equal(relu, np.maximum(X, 0))
    np.testing.assert_array_equal(tanh, np.tanh(X))


def test_trace_restores_the_previous_global_tape():
    before = tape.get_global_tape()
    static.trace(lambda x: tape.ops.relu(x), X)
    assert tape.get_global_tape() is before
    with pytest.raises(ZeroDivisionError):
        static.trace(lambda x: 1 / 0, X)
    assert tape.get_global_tape() is before


@pytest.mark.parametrize("read", [
    lambda v: bool(v), lambda v: v.value(), lambda v: float(v), lambda v: np.asarray(v),
    lambda v: v.numpy(), lambda v: v.item()])
def test_reading_a_value_while_tracing_names_the_users_line(read):
    def fn(x):
        y = tape.ops.mean(x)
        return tape.ops.relu(x) if read(y) else x
    line = inspect.getsourcelines(read)[1]
    with pytest.raises(tape.PreconditionNotMetError) as error:
        static.trace(fn, X)
    message = str(error.value)
    assert f"{__file__}:{line}" in message and "while tracing" in message, message


def test_values_can_be_read_outside_a_trace():
    v = tape.Variable(np.array(2.5))
    assert bool(v) and float(v) == 2.5 and np.asarray(v) == 2.5 and v.value() == 2.5
    assert v.numpy() is v.value() and v.item() == 2.5 and type(v.item()) is float


def test_to_program_of_a_hand_recorded_tape():
    recorder = tape.Tape(tracing=True)
    x = tape.Variable(X, name="x_in")
    (h,) = recorder.add_op("relu", {"X": [x]})["Out"]
    (y,) = recorder.add_op("scale", {"X": [h]}, attrs={"scale": 2.0})["Out"]
    program = static.to_program(recorder, feed=[x], fetch=[y.name])
    assert program.feed_names == ["x_in"] and program.fetch_names == [y.name]
    assert program.global_block().ops[2].attrs == {**op_info("scale").defaults, "scale": 2.0,
                                                   "op_role": 0}
    (out,) = static.Executor().run(program, {"x_in": X}, [y.name])
    np.testing.assert_array_equal(out, 2 * np.maximum(X, 0))


def test_to_program_needs_a_tracing_tape():
    with pytest.raises(tape.PreconditionNotMetError, match="tracing=True"):
        static.to_program(tape.Tape(), feed=[], fetch=[])


def test_two_variables_with_one_name_are_an_error():
    def fn(x):
        return x + tape.Variable(np.ones(4, np.float32), name=x.name)
    with pytest.raises(tape.InvalidArgumentError, match="two different Variables"):
        static.trace(fn, X)


def test_str_shows_one_line_per_op():
    program = static.trace(lambda x: tape.ops.relu(x), X)
    text = str(program)
    assert "relu(X=[input_0])" in text and "feed(X=[feed])" in text and "{col=0}" in text
