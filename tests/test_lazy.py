"""Lazy execution: recording computes nothing, a value request runs only what it needs, results
equal eager ones bit for bit, errors come at record time, lazy and eager Variables mix, backward
releases what it consumed, and export works from a lazy tape."""
import contextlib
import gc
import weakref

import numpy as np
import pytest

import tape
from tape import Variable, batching, layers, ops, optim
from tape import functional as F


@pytest.fixture
def kernel_calls(monkeypatch):
    """The op types of the kernels lazy execution runs, in order (one entry per call)."""
    calls = []
    invoke = batching.invoke

    def counting(plan, arrays, wants=None, names=None):
        calls.append(plan.info.type)
        return invoke(plan, arrays, wants, names)
    monkeypatch.setattr(batching, "invoke", counting)
    return calls


def param(shape, seed=0):
    return Variable(np.random.default_rng(seed).standard_normal(shape).astype(np.float32),
                    stop_gradient=False)


def assign_into(target, value):
    """An in-place write, as an optimizer's update is (outside recording)."""
    with tape.no_grad():
        tape.get_global_tape().add_op("assign", {"X": [value]}, {"Out": [target]})


def constant(shape, seed=1):
    return Variable(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_recording_computes_nothing_and_a_value_is_computed_once(kernel_calls):
    x, w = constant((2, 3)), param((3, 4))
    with tape.lazy():
        tape.reset_global_tape()
        y = ops.relu(ops.matmul_v2(x, w))
        assert y.pending and y.shape == (2, 4) and kernel_calls == []
        first = y.value()
    assert kernel_calls == ["matmul_v2", "relu"]
    np.testing.assert_array_equal(first, np.maximum(x.value() @ w.value(), 0))
    assert y.value() is first and not y.pending and kernel_calls == ["matmul_v2", "relu"]


def test_a_partial_value_runs_only_the_ops_it_needs(kernel_calls):
    x = param((4, 5))
    with tape.lazy():
        tape.reset_global_tape()
        a = ops.tanh(x)
        b = ops.sigmoid(x)        # another branch: not needed by `c`
        c = ops.scale(a, scale=2.0)
        d = ops.exp(b)
        c.numpy()
        assert kernel_calls == ["tanh", "scale"]
        assert b.pending and d.pending
        d.numpy()
        assert kernel_calls == ["tanh", "scale", "sigmoid", "exp"]
        a.numpy()     # computed with c already: nothing runs
    assert kernel_calls == ["tanh", "scale", "sigmoid", "exp"]


@pytest.mark.parametrize("ask", [
    lambda v: v.value(), lambda v: v.numpy(), lambda v: np.asarray(v), repr, str,
    lambda v: ops.mean(v).item(), lambda v: float(ops.mean(v)), lambda v: v.detach().value(),
])
def test_every_way_of_reading_a_value_computes_it(ask):
    x = constant((2, 3))
    with tape.lazy():
        y = ops.scale(x, scale=3.0)
        assert y.pending
        ask(y)
        assert not y.pending
    np.testing.assert_array_equal(y.value(), x.value() * np.float32(3.0))


def test_the_flag_makes_the_thread_lazy_and_back():
    x = constant((3,))
    tape.set_flags({"FLAGS_lazy_execution": True})
    try:
        assert tape.get_global_tape().lazy and tape.reset_global_tape().lazy
        y = ops.relu(x)
        assert y.pending
    finally:
        tape.set_flags({"FLAGS_lazy_execution": False})
    assert not tape.get_global_tape().lazy
    assert not ops.relu(x).pending
    np.testing.assert_array_equal(y.value(), np.maximum(x.value(), 0))


def test_errors_are_raised_at_the_call_line(forbid_kernels):
    x, w = constant((2, 3)), param((4, 5))
    forbid_kernels("mul")
    with tape.lazy():
        with pytest.raises(tape.InvalidArgumentError, match="mul.*X.*Y") as error:
            ops.mul(x, w)
        assert error.traceback[0].frame.code.name == \
            "test_errors_are_raised_at_the_call_line"
        with pytest.raises(tape.InvalidArgumentError, match="scale.*'bias'"):
            ops.scale(x, bias="one")


def _mlp_step(model, sgd, x, label):
    loss = F.cross_entropy(model(Variable(x)), label)
    loss_value = loss.numpy().copy()
    loss.backward()
    grads = [p.grad.numpy().copy() for p in model.params()]
    sgd(model.params())
    return loss_value, grads, [p.numpy().copy() for p in model.params()]


@pytest.mark.parametrize("optimizer", [optim.SGD, optim.Adam])
def test_training_steps_equal_eager_bit_for_bit(optimizer):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    label = rng.integers(0, 3, 6)
    results = []
    for lazy in (False, True):
        tape.seed(7)
        model = layers.Sequential(layers.Linear(8, 16, act="tanh"), layers.Linear(16, 3))
        sgd = optimizer(learning_rate=0.1)
        steps = []
        for _ in range(3):
            with _mode(lazy):
                tape.reset_global_tape()
                steps.append(_mlp_step(model, sgd, x, label))
            assert not any(p.pending for p in model.params()), "a step takes effect at once"
        results.append(steps)
    for eager_step, lazy_step in zip(*results):
        for e, z in zip(eager_step, lazy_step):
            for a, b in zip(e if isinstance(e, list) else [e], z if isinstance(z, list) else [z]):
                np.testing.assert_array_equal(a, b)


def _mode(lazy):
    return tape.lazy() if lazy else contextlib.nullcontext()


def test_lazy_and_eager_variables_mix_on_one_tape(kernel_calls):
    x, w, v = param((3, 4), 0), param((3, 4), 1), param((3, 4), 2)
    tape.reset_global_tape()
    h = x * w                         # eager
    with tape.lazy():
        g = ops.tanh(h) * v           # lazy, reading an eager Variable
    assert g.pending and not h.pending
    y = ops.reduce_sum(g * x)         # eager, reading a pending one: computed first
    assert not g.pending and kernel_calls == ["tanh", "elementwise_mul"]
    y.backward()
    lazy_grads = [p.grad.numpy() for p in (x, w, v)]
    for p in (x, w, v):
        p.grad = None
    tape.reset_global_tape()
    ops.reduce_sum(ops.tanh(x * w) * v * x).backward()
    for p, lazy_grad in zip((x, w, v), lazy_grads):
        np.testing.assert_array_equal(lazy_grad, p.grad.numpy())


def test_an_in_place_write_does_not_change_what_an_earlier_lazy_op_reads():
    p = constant((3,), 5)
    before = p.numpy().copy()
    with tape.lazy():
        doubled = ops.scale(p, scale=2.0)
        assign_into(p, ops.scale(p, scale=-1.0))   # p pending on the new write
        assert p.pending
    np.testing.assert_array_equal(doubled.value(), before * np.float32(2.0))
    np.testing.assert_array_equal(p.value(), -before)


def test_backward_releases_values_as_it_consumes_them():
    x, w, v = param((3, 4), 0), param((3, 4), 1), param((3, 4), 2)
    with tape.lazy():
        global_tape = tape.reset_global_tape()
        h = x * w
        y = ops.reduce_sum(h * v)   # keeps h (v's gradient reads it) and v
        h_ref = weakref.ref(h)
        del h
        y.backward()
        gc.collect()
    assert h_ref() is None and len(global_tape) == 0
    np.testing.assert_allclose(v.grad.value(), x.value() * w.value(), rtol=1e-6)


def test_backward_keeps_a_computed_value_only_while_it_needs_it():
    x, w, v = param((3, 4), 0), param((3, 4), 1), param((3, 4), 2)
    with tape.lazy():
        tape.reset_global_tape()
        h = x * w
        y = ops.reduce_sum(h * v)
        y.value()       # computes h: the tape keeps it for v's gradient
        h_ref, array_ref = weakref.ref(h), weakref.ref(h.value())
        del h
        gc.collect()
        assert h_ref() is not None, "the tape keeps h until backward"
        y.backward()
        gc.collect()
    assert h_ref() is None and array_ref() is None


def test_a_kept_result_does_not_keep_what_only_backward_needed():
    """What a lazy op ran on is kept for backward by its tape, not by the Variables it
    made: once the tape is gone, a result the user keeps holds only its own value."""
    x = param((50,))
    with tape.lazy():
        tape.reset_global_tape()
        b = ops.exp(x)
        c = ops.tanh(b)     # tanh's gradient reads only its output: b is not kept for it
        ops.reduce_sum(c).value()   # runs c's op; c still refers to it
        b_ref = weakref.ref(b.value())
        del b
        tape.reset_global_tape()
        gc.collect()
    assert b_ref() is None and c.value().shape == (50,)


def test_ops_nobody_can_ask_for_are_freed_unrun(kernel_calls):
    x = ops.scale(constant((1000,)), scale=2.0)     # eager: an array only x holds
    array_ref = weakref.ref(x.value())
    with tape.lazy():
        y = ops.exp(x)          # the pending op holds x's array
        del x
        gc.collect()
        assert array_ref() is not None
        del y
        gc.collect()
    assert array_ref() is None and kernel_calls == []


def test_a_second_backward_on_a_lazy_tape_is_still_an_error():
    x = param((2,))
    with tape.lazy():
        tape.reset_global_tape()
        y = ops.reduce_sum(x * x)
        y.backward()
        with pytest.raises(tape.PreconditionNotMetError, match="already run"):
            y.backward()


def test_export_from_a_lazy_tape(tmp_path):
    tape.seed(1)
    model = layers.Sequential(layers.Linear(4, 8, act="relu"), layers.Linear(8, 2))
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    expected = model(Variable(x)).numpy()
    recorder = tape.LazyTape(tracing=True)
    with tape.tape.using_tape(recorder):
        inp = Variable(x, name="x")
        out = model(inp)
    assert out.pending
    program = tape.static.to_program(recorder, [inp], [out])
    fetched, = tape.static.Executor().run(program, {"x": x}, program.fetch_names)
    np.testing.assert_array_equal(fetched, expected)
    with tape.lazy():
        traced = tape.static.trace(model, x)
    tape.static.save_inference_model(str(tmp_path), traced)
    loaded = tape.static.load_inference_model(str(tmp_path))
    fetched, = tape.static.Executor().run(loaded, {loaded.feed_names[0]: x}, loaded.fetch_names)
    np.testing.assert_allclose(fetched, expected, rtol=1e-6)


def test_pending_parameters_of_a_lazy_step_reach_a_trace():
    tape.seed(2)
    layer = layers.Linear(3, 2)
    w = layer.params()[0]
    with tape.lazy():
        assign_into(w, ops.scale(w, scale=0.5))
    assert w.pending
    program = tape.static.trace(layer, np.ones((1, 3), np.float32))
    assert not w.pending
    fetched, = tape.static.Executor().run(program, {program.feed_names[0]: np.ones((1, 3),
                                          np.float32)}, program.fetch_names)
    np.testing.assert_allclose(fetched, layer(Variable(np.ones((1, 3), np.float32))).numpy())


def test_lazy_mode_is_per_thread():
    import threading
    seen = {}

    def worker():
        seen["lazy"] = tape.get_global_tape().lazy
        seen["pending"] = ops.relu(constant((2,))).pending
    with tape.lazy():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert ops.relu(constant((2,))).pending
    assert seen == {"lazy": False, "pending": False}


def test_the_nan_check_names_a_lazy_op_when_its_value_is_computed():
    x = Variable(np.array([-1.0, 4.0], np.float32))
    tape.set_flags({"FLAGS_check_nan_inf": True})
    try:
        with tape.lazy():
            y = ops.log(x)      # recorded: nothing computed, nothing checked yet
            with np.errstate(invalid="ignore"), \
                    pytest.raises(tape.PreconditionNotMetError, match="operator log output Out"):
                y.value()
    finally:
        tape.set_flags({"FLAGS_check_nan_inf": False})


def _eager_then_lazy(kernel_calls, forward, params):
    """``forward()`` (one reset tape; returns ``(output, loss)``) eagerly, then lazily: per mode
    the output's shape, what had run (and whether the output was pending) when recording
    ended, and the params' gradients after backward."""
    def step():
        tape.reset_global_tape()
        out, loss = forward()
        at_record = list(kernel_calls), out.pending
        loss.backward()
        grads = [p.grad.numpy().copy() for p in params]
        for p in params:
            p.grad = None
        return out.shape, at_record, grads

    eager = step()
    kernel_calls.clear()
    with tape.lazy():
        lazy = step()
    for a, b in zip(eager[2], lazy[2]):
        np.testing.assert_array_equal(a, b)
    assert lazy[0] == eager[0]
    return lazy[0], lazy[1]


def test_an_op_whose_output_shape_its_values_tell_runs_when_recorded(kernel_calls):
    """A zero state as a traced RNN makes it, fill_constant over the input's run-time shape
    (shape + slice + a ShapeTensorList): its output shape is known only from values, so a lazy
    tape runs that op (and what it reads) at once; the rest stays pending, and backward through
    it equals eager."""
    w = param((4, 8))
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)

    def forward():
        h = ops.tanh(ops.matmul_v2(Variable(x), w))
        size = ops.slice(ops.shape(h), axes=[0], starts=[0], ends=[1], decrease_axis=[0])
        zeros = ops.fill_constant(ShapeTensorList=[size, ops.fill_any_like(size, value=8.0)],
                                  shape=[-1, 8], dtype=tape.dtypes.FP32, value=0.0)
        return zeros, ((h + zeros) * h).sum()

    shape, (computed, pending) = _eager_then_lazy(kernel_calls, forward, [w])
    assert shape == (3, 8)
    # fill_constant itself ran eagerly, uncounted; what it reads was computed for it
    assert computed == ["matmul_v2", "tanh", "shape", "slice", "fill_any_like"]
    assert not pending


def test_a_cell_without_a_state_records_its_zero_state_without_computing_its_input(
        kernel_calls):
    """Outside a trace the batch is known at record time: the zero state is a constant of that
    shape, and a lazy LSTM cell computes nothing until a value is asked for; results
    equal eager's bit for bit."""
    cell = layers.LSTMCell(4, 8)
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)

    def forward():
        h, c = cell(ops.tanh(Variable(x)))
        return h, (h * c).sum()

    shape, (computed, pending) = _eager_then_lazy(kernel_calls, forward, cell.params())
    assert shape == (3, 8)
    assert computed == [] and pending
