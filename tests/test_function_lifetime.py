"""A traced function's op lives as long as something uses it: the function's trace, or an op
recorded with it. Then it is unregistered, with its grad op and batch rule, so a process that
makes functions (or lazy recurrent cells) again and again does not keep every one."""
import contextlib
import gc
import weakref

import numpy as np
import pytest

import tape
from tape import layers, ops
from tape.batch_rules import rule_for
from tape.errors import NotFoundError
from tape.registry import _TRANSIENT, REGISTRY, op_info

RNG = np.random.default_rng(9)


def _recorded_type() -> str:
    (handle,) = [h for h in tape.get_global_tape() if h.type.startswith("function_")]
    return handle.type


def _linear_tanh():
    linear = layers.Linear(3, 3, dtype="float64")
    return linear, tape.function(lambda x: ops.tanh(linear(x)))


def test_a_dropped_function_and_its_ops_unregister_its_op_grad_op_and_rule():
    _, fn = _linear_tanh()
    with tape.lazy():
        tape.reset_global_tape()
        fn(tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)).numpy()
        op_type = _recorded_type()
    assert op_info(op_type) and op_info(op_type + "_grad") and rule_for(op_type)
    del fn
    tape.reset_global_tape()
    gc.collect()
    for gone in (op_type, op_type + "_grad"):
        with pytest.raises(NotFoundError):
            op_info(gone)
    assert rule_for(op_type) is None


@pytest.mark.parametrize("lazy", [False, True])
def test_recorded_ops_keep_a_dropped_function_usable_until_backward(lazy):
    """The ops on the tape hold the op: backward after the function is gone still runs its
    grad op, and gives what it gives with the function alive."""
    linear, fn = _linear_tanh()
    x_np = RNG.standard_normal((2, 3))

    def gradients(drop: bool):
        nonlocal fn
        tape.reset_global_tape()
        with tape.lazy() if lazy else contextlib.nullcontext():
            x = tape.Variable(x_np, stop_gradient=False)
            loss = ops.reduce_sum(fn(x), reduce_all=True)
            if drop:
                fn = None
                gc.collect()
            loss.backward()
        grads = [x.grad.numpy()] + [p.grad.numpy() for p in linear.params()]
        for p in linear.params():
            p.grad = None
        return grads

    kept = gradients(drop=False)
    for ours, expected in zip(gradients(drop=True), kept, strict=True):
        np.testing.assert_array_equal(ours, expected)


def test_cells_made_again_and_again_do_not_accumulate_ops():
    x = tape.Variable(RNG.standard_normal((1, 4)).astype(np.float32))

    def one_cell():
        cell = layers.LSTMCell(4, 5)
        with tape.lazy():
            tape.reset_global_tape()
            cell(x, (cell.zeros(1), cell.zeros(1)))[0].numpy()

    def cell_ops() -> int:
        tape.reset_global_tape()
        gc.collect()
        return sum(t.startswith("function_lstm_cell") for t in [*REGISTRY, *_TRANSIENT])

    one_cell()
    before = cell_ops()
    for _ in range(20):
        one_cell()
    assert cell_ops() == before


def test_values_kept_for_a_grad_call_go_with_the_function():
    """A forward call keeps its values for its grad call while its input arrays live; an input
    that outlives the function (a constant given to every call) must not keep them."""
    x = tape.Variable(RNG.standard_normal((2, 3)), stop_gradient=False)    # outlives fn
    fn = tape.function(lambda v: ops.tanh(v) * 2.0)
    with tape.lazy():
        tape.reset_global_tape()
        out = fn(x)
        kept = weakref.ref(out.value())
    del out, fn
    tape.reset_global_tape()
    gc.collect()
    assert kept() is None
