"""A lazy op with a slot of several inputs (concat, sum, stack): the general lazy runner gathers
the slot in one written-out loop (``tape.runner``); what it records, reads and refuses is what
it was with one call per input."""
import numpy as np
import pytest
from test_positional import unchecked  # noqa: F401 (a fixture: the checks off)

import tape
from tape.errors import InvalidArgumentError, PreconditionNotMetError

ops = tape.ops


def _leaf(seed: int) -> tape.Variable:
    return tape.Variable(np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32),
                         stop_gradient=False)


def test_pending_inputs_are_read_as_refs_and_the_result_and_gradients_are_the_eager_ones():
    leaves = [_leaf(i) for i in range(4)]
    tape.reset_global_tape()
    expected = ops.concat([x * 2.0 for x in leaves], axis=0)
    tape.get_global_tape().backward(ops.mean(expected * expected))
    eager_grads = [x.grad.numpy() for x in leaves]
    for x in leaves:
        x.grad = None
    with tape.lazy():
        tape.reset_global_tape()
        doubled = [x * 2.0 for x in leaves]
        out = ops.concat(doubled, axis=0)
        op = out._lazy[0]
        assert op.results is None
        assert [ref is v._lazy for ref, v in zip(op.args["X"], doubled)] == [True] * 4
        tape.get_global_tape().backward(ops.mean(out * out))
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    for x, grad in zip(leaves, eager_grads):
        np.testing.assert_array_equal(x.grad.numpy(), grad)


def test_an_input_pending_on_an_op_that_ran_is_read_as_its_value():
    with tape.lazy():
        tape.reset_global_tape()
        first, ran = ops.split(_leaf(0) * 2.0, num=2, axis=0)
        first.numpy()       # runs split: ``ran`` still holds the ref of an op that ran
        assert ran._value is None and ran._lazy[0].results is not None
        pending = _leaf(1)[:1] * 3.0
        leaf = tape.Variable(np.ones((1, 3), np.float32))
        out = ops.sum([ran, pending, leaf])
        args = out._lazy[0].args["X"]
        assert ran._lazy is None and args[0] is ran._value
        assert args[1] is pending._lazy and args[2] is leaf._value
        np.testing.assert_array_equal(out.numpy(), ran.numpy() + pending.numpy() + 1.0)


def test_each_refused_input_gets_the_error_of_the_call_in_the_same_order():
    x = _leaf(0)
    with tape.lazy():
        tape.reset_global_tape()
        old = x * 2.0
        tape.reset_global_tape()
        with pytest.raises(InvalidArgumentError, match="concat: input 'X' is required"):
            ops.concat([], axis=0)
        with pytest.raises(InvalidArgumentError, match="concat: input 'X' expects a Variable, "
                                                       "received ndarray"):
            ops.concat([x, np.ones((2, 3), np.float32)], axis=0)
        with pytest.raises(InvalidArgumentError, match=r"concat: input 'X' \(.+\) holds no "
                                                       r"value"):
            ops.concat([x, tape.Variable()], axis=0)
        with pytest.raises(PreconditionNotMetError, match="concat: input 'X' .* was computed "
                                                          "on a tape that has since been reset"):
            ops.concat([x, old], axis=0)
        # the checks of every input come before the stale one's
        with pytest.raises(InvalidArgumentError, match="expects a Variable, received int"):
            ops.concat([old, x, 3], axis=0)
        ops.concat([x, x * 1.0], axis=0)    # the tape still records
        assert len(tape.get_global_tape().deferred) == 2


def test_an_absent_optional_slot_of_several_inputs_is_recorded_as_none():
    x = _leaf(0)
    with tape.lazy():
        t = tape.reset_global_tape()
        parts = t.run(tape.registry.op_info("split"), {"X": [x]}, {"num": 3, "axis": 1})
    op = parts["Out"][0]._lazy[0]
    assert op.args["SectionsTensorList"] is None and op.args["X"] is x._value
    # (an odd width: split's own error, raised at the call)
    with tape.lazy(), pytest.raises(InvalidArgumentError, match="split: attribute num=2"):
        tape.reset_global_tape().run(tape.registry.op_info("split"), {"X": [x]},
                                     {"num": 2, "axis": 1})


@pytest.mark.parametrize("tracing", [False, True])
def test_the_handle_holds_the_entries_an_eager_op_records(tracing):
    leaf, constant = _leaf(0), tape.Variable(np.ones((2, 3), np.float32))

    def entries(lazy: bool) -> list:
        t = tape.LazyTape(tracing) if lazy else tape.Tape(tracing)
        with tape.tape.using_tape(t):
            computed = leaf * 2.0
            ops.concat([leaf, constant, computed], axis=0)
        return [type(e).__name__ if e is not computed.desc else "computed"
                for e in t._ops[-1].entries[:3]]

    expected = ["Variable"] * 3 if tracing else ["Variable", "VarDesc", "computed"]
    assert entries(False) == expected
    assert entries(True) == expected


@pytest.mark.parametrize("tape_class", [tape.Tape, tape.LazyTape])
@pytest.mark.parametrize("tracing", [False, True])
@pytest.mark.usefixtures("unchecked")
def test_a_positional_split_records_its_outputs_as_the_op_keeps_them(tape_class, tracing):
    t = tape_class(tracing)
    with tape.tape.using_tape(t):
        for _ in range(2):      # (the second call finds the plan: the positional runner's)
            parts = ops.split(_leaf(0), num=3, axis=1)
    outputs = list(t._ops[-1].entries[1:])
    expected = parts if tracing else [v.desc for v in parts]
    assert len(outputs) == 3 and all(e is x for e, x in zip(outputs, expected))
