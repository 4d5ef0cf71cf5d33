"""``tape.ops.<type>``: the functions written out per op type from its slots."""
import inspect

import numpy as np
import pytest

import tape
from tape.errors import InvalidArgumentError


def _x(*shape):
    return tape.Variable(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def test_too_many_inputs_is_a_type_error_naming_the_slots():
    with pytest.raises(TypeError, match=r"elementwise_add takes at most 2 inputs \(X, Y\), "
                                        r"received 3"):
        tape.ops.elementwise_add(_x(2), _x(2), _x(2))


def test_slots_by_position_by_name_or_both(mode):
    x, y = _x(2, 3), _x(2, 3) * 2.0
    expected = x.numpy() - y.numpy()
    for out in (tape.ops.elementwise_sub(x, y), tape.ops.elementwise_sub(X=x, Y=y),
                tape.ops.elementwise_sub(x, Y=y), tape.ops.elementwise_sub(Y=y, X=x, axis=-1)):
        np.testing.assert_array_equal(out.numpy(), expected)


def test_none_skips_a_dispensable_slot_and_a_list_fills_a_duplicable_one(mode):
    x = _x(2, 3)
    out = tape.ops.concat((x, x), None, axis=0)     # any sequence; AxisTensor skipped
    np.testing.assert_array_equal(out.numpy(), np.concatenate([x.numpy()] * 2))


def test_a_missing_required_slot_names_the_op_and_the_slot():
    with pytest.raises(InvalidArgumentError, match="elementwise_add: input 'Y' is required"):
        tape.ops.elementwise_add(_x(2))
    with pytest.raises(InvalidArgumentError, match="relu: input 'X' expects a Variable, "
                                                   "received NoneType"):
        tape.ops.relu(X=None)


def test_results_one_variable_a_list_or_a_tuple_in_proto_order(mode):
    x = _x(2, 6)
    assert isinstance(tape.ops.relu(x), tape.Variable)
    pieces = tape.ops.split(x, num=3, axis=1)
    assert isinstance(pieces, list) and [p.shape for p in pieces] == [(2, 2)] * 3
    label = tape.Variable(np.array([[1], [0]], np.int64))
    result = tape.ops.softmax_with_cross_entropy(x, label)
    assert isinstance(result, tuple) and [r.shape for r in result] == [(2, 6), (2, 1)]


def test_name_signature_and_doc():
    op = tape.ops.concat
    assert op.__name__ == "concat" and op.__module__ == "tape.ops"
    assert str(inspect.signature(op)) == "(X, AxisTensor=None, *, axis=0)"
    assert op.__doc__.startswith("concat(X*, AxisTensor?; axis=0) -> Out")
