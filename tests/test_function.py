"""tape.function: a traced function recorded as one op, eager and lazy (batching:
tests/test_function_batching.py)."""
import gc
import pathlib
import sys
import weakref

import numpy as np
import pytest

import tape
from tape import layers, ops
from tape.testing import check_function_grad, check_grad

pytestmark = pytest.mark.usefixtures("user_ops")    # each trace registers an op: removed after


@pytest.fixture(params=["checks on", "checks off"])
def checks(request, restore_flags):
    """Runs the test with the suite's unused-input check on (every kernel through ``invoke``)
    and with it off (the traced program's kernels called directly)."""
    tape.set_flags({"FLAGS_enable_unused_var_check": request.param == "checks on"})


def floats(seed, *shape, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def make_cell(size=4, hidden=3, dtype="float32"):
    """An LSTM-like cell over a captured Linear, returning two Variables."""
    tape.seed(1)
    linear = layers.Linear(size + hidden, 2 * hidden, dtype=dtype)

    def cell(x, h):
        a, b = ops.split(linear(ops.concat([x, h], axis=1)), num=2, axis=1)
        return ops.tanh(a) * ops.sigmoid(b), ops.exp(a)
    return cell, linear


def run_cell(cell, linear, x, h):
    """Outputs, and the gradients of x, h and linear's parameters, of a loss over both
    outputs; on the thread's mode (eager, or lazy inside ``tape.lazy()``)."""
    for v in (x, h, *linear.params()):
        v.grad = None
    tape.reset_global_tape()
    out, e = cell(x, h)
    loss = ops.reduce_sum(out * out) + ops.reduce_mean(e)
    loss.backward()
    return [out.numpy().copy(), e.numpy().copy(), x.grad.numpy(), h.grad.numpy(),
            *(p.grad.numpy() for p in linear.params())]


def test_one_call_equals_the_function_bit_for_bit(mode, checks):
    """Forward and every gradient: one call adds each gradient's parts in eager's order."""
    cell, linear = make_cell()
    traced = tape.function(cell)
    x = tape.Variable(floats(0, 2, 4), stop_gradient=False)
    h = tape.Variable(floats(1, 2, 3), stop_gradient=False)
    expected = run_cell(cell, linear, x, h)
    for _ in range(2):      # the second call reuses the trace
        for got, want in zip(run_cell(traced, linear, x, h), expected, strict=True):
            np.testing.assert_array_equal(got, want)
    assert len(traced.traces) == 1


def test_records_one_op(mode):
    cell, _ = make_cell()
    traced = tape.function(cell)
    x = tape.Variable(floats(0, 2, 4), stop_gradient=False)
    out, e = traced(x, x[:, :3])
    recorded = [h.type for h in tape.get_global_tape()]
    assert recorded[-1].startswith("function_cell_") and len(recorded) == 2    # slice, cell


def test_several_calls_share_the_captured_parameters(mode, checks):
    """Two calls: outputs bit for bit; a parameter's gradient sums each call's sum of parts
    (eager sums them all in one order), so it agrees within float32 rounding."""
    cell, linear = make_cell()
    traced = tape.function(cell)
    x = tape.Variable(floats(0, 2, 4), stop_gradient=False)
    h = tape.Variable(floats(1, 2, 3), stop_gradient=False)

    def twice(f):
        def run(x, h):
            first, _ = f(x, h)
            return f(x, first)
        return run
    expected = run_cell(twice(cell), linear, x, h)
    got = run_cell(twice(traced), linear, x, h)
    for a, b in zip(got[:2], expected[:2]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[2:], expected[2:]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * np.abs(b).max())


def test_gradients_match_central_differences(checks):
    cell, linear = make_cell(dtype="float64")
    traced = tape.function(lambda x, h: cell(x, h)[0])
    x, h = floats(2, 3, 4, dtype=np.float64), floats(3, 3, 3, dtype=np.float64)
    check_function_grad(traced, x, h)
    # the op itself, captured parameters included, float64 and float32
    (op_type,) = [t.info.type for key, t in traced.traces.items()
                  if not any(key[2::3])]      # (the key: shape, dtype, stop_gradient per argument)
    w, b = (p.numpy() for p in linear.params())
    check_grad(op_type, {"Args": [x, h], "Captured": [w, b]})


def test_a_captured_pending_variable_gets_its_gradient():
    p = tape.Variable(floats(4, 1, 3), stop_gradient=False)
    x = tape.Variable(floats(5, 2, 3), stop_gradient=False)
    grads = []
    for traced in (False, True):
        p.grad = x.grad = None
        with tape.lazy():
            tape.reset_global_tape()
            w = ops.sigmoid(p)      # pending, read by the function: captured

            def scaled(x, w=w):
                return ops.tanh(x) * w
            assert w.pending
            fn = tape.function(scaled) if traced else scaled
            ops.reduce_sum(fn(x)).backward()
        grads.append((p.grad.numpy(), x.grad.numpy()))
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_array_equal(got, want)


def test_a_new_shape_traces_again_and_an_old_one_reuses_its_trace():
    traced = tape.function(lambda x: ops.relu(x) * 2.0)
    for rows in (2, 3, 2):
        x = floats(rows, rows, 4)
        np.testing.assert_array_equal(traced(tape.Variable(x)).numpy(), np.maximum(x, 0) * 2)
    assert len(traced.traces) == 2


def test_a_trace_per_signature_and_a_written_call_per_number_of_arguments(mode):
    """A call is keyed by each argument's shape, dtype and stop_gradient (a change in any one
    traces again, a signature seen before reuses its trace), and the written call of one
    number of arguments, shared by every Function, serves each from its own traces."""
    double, halve = tape.function(lambda x: x * 2.0), tape.function(lambda x: x * 0.5)
    x = floats(0, 2, 3)
    for value, stop_gradient in [(x, True), (x.astype(np.float64), True), (x, False),
                                 (x[:1], True), (x, True), (x, False)]:
        for traced, scale in ((double, 2.0), (halve, 0.5)):
            got = traced(tape.Variable(value, stop_gradient=stop_gradient))
            assert got.stop_gradient == stop_gradient
            np.testing.assert_array_equal(got.numpy(), value * scale, strict=True)
    assert len(double.traces) == len(halve.traces) == 4
    added = tape.function(lambda x, y: x + y)(tape.Variable(x), tape.Variable(x))
    np.testing.assert_array_equal(added.numpy(), x + x)


def test_a_variable_subclass_argument_is_keyed_as_a_variable():
    class Named(tape.Variable):
        __slots__ = ()
    traced = tape.function(lambda x: x * float(x.shape[0]))     # a trace fixes the rows
    for rows in (2, 3, 2):
        x = floats(rows, rows, 4)
        np.testing.assert_array_equal(traced(Named(x)).numpy(), x * rows)
    assert len(traced.traces) == 2


def test_a_captured_activation_of_an_earlier_tape_is_traced_again():
    p = tape.Variable(floats(6, 1, 3), stop_gradient=False)
    x = tape.Variable(floats(7, 2, 3))
    traced = tape.function(lambda x: x * w)
    ops_recorded = set()
    for _ in range(2):
        p.grad = None
        tape.reset_global_tape()
        w = ops.exp(p)          # a new Variable on each tape
        ops.reduce_sum(traced(x)).backward()
        np.testing.assert_allclose(p.grad.numpy(), (np.exp(p.numpy()) * x.numpy()).sum(0,
                                   keepdims=True), rtol=1e-6)
        ops_recorded.add(next(iter(traced.traces.values())).info.type)
    assert len(ops_recorded) == 2       # traced on each tape


def test_a_shape_error_inside_names_the_inner_op_at_the_call():
    traced = tape.function(lambda x, y: ops.matmul_v2(x, y))
    with pytest.raises(tape.InvalidArgumentError, match="matmul_v2"):
        traced(tape.Variable(floats(0, 2, 3)), tape.Variable(floats(1, 4, 5)))


def test_reading_a_value_inside_is_refused():
    traced = tape.function(lambda x: x * float(ops.reduce_sum(x)))
    with pytest.raises(tape.PreconditionNotMetError, match="reads the value"):
        traced(tape.Variable(floats(0, 2, 3)))
    traced = tape.function(lambda x: x if x.numpy().sum() > 0 else -x)
    with pytest.raises(tape.PreconditionNotMetError, match="numpy"):
        traced(tape.Variable(floats(0, 2, 3)))


def test_arguments_and_results_must_be_variables():
    with pytest.raises(tape.InvalidArgumentError, match="arguments must be Variables"):
        tape.function(lambda x: x * 2.0)(np.ones(3, np.float32))
    with pytest.raises(tape.InvalidArgumentError, match="no op inside it computed"):
        tape.function(lambda x: x)(tape.Variable(floats(0, 2)))
    with pytest.raises(tape.InvalidArgumentError, match="must return a Variable"):
        tape.function(lambda x: 3.0)(tape.Variable(floats(0, 2)))
    with pytest.raises(tape.InvalidArgumentError, match="at least one Variable argument"):
        tape.function(lambda: ops.tanh(tape.Variable(floats(0, 2))))()


def test_an_output_shape_only_values_tell_is_refused():
    """An LSTMCell called without a state makes its zero state with ops whose output shape
    comes from a value when traced (``layers.recurrent.batch_zeros``)."""
    cell = layers.LSTMCell(4, 3)
    with pytest.raises(tape.InvalidArgumentError, match="pass the state as an argument"):
        tape.function(lambda x: cell(x)[0])(tape.Variable(floats(0, 2, 4)))


def test_export_inlines_the_function():
    cell, _ = make_cell()
    traced = tape.function(cell)
    x, h = floats(0, 2, 4), floats(1, 2, 3)
    program = tape.static.trace(lambda x, h: traced(x, h)[0], x, h)
    types = [op.type for op in program.desc.block(0).ops]
    assert not any(t.startswith("function_") for t in types)
    assert {"concat", "split", "tanh", "sigmoid", "elementwise_mul"} <= set(types)
    assert not traced.traces
    (served,) = tape.static.Executor().run(program, {"input_0": x, "input_1": h},
                                           program.fetch_names)
    np.testing.assert_array_equal(served, traced(tape.Variable(x), tape.Variable(h))[0].numpy())


def test_backward_releases_what_the_op_kept():
    """The op keeps its inputs for its grad op (an intermediate argument here), and backward
    frees them with its record, as for any op."""
    cell, linear = make_cell()
    traced = tape.function(cell)
    x = tape.Variable(floats(0, 2, 4), stop_gradient=False)
    a = x * 2.0
    out, _ = traced(a, ops.tanh(x[:, :3]))
    kept = weakref.ref(a)
    del a
    gc.collect()
    assert kept() is not None       # held by the function op's record
    ops.reduce_sum(out).backward()
    gc.collect()
    assert kept() is None
    assert len(tape.get_global_tape()) == 0


def test_a_constant_made_inside_is_held_by_the_trace():
    traced = tape.function(lambda x: ops.elementwise_add(x, tape.Variable(np.ones(3, np.float32))))
    ops_recorded = set()
    for _ in range(3):
        x = floats(0, 2, 3)
        np.testing.assert_array_equal(traced(tape.Variable(x)).numpy(), x + 1)
        ops_recorded |= {t.info.type for t in traced.traces.values()}
    assert len(ops_recorded) == 1       # traced once


def test_the_op_refuses_a_gradient_its_trace_does_not_give():
    traced = tape.function(lambda x: ops.tanh(x))
    x = floats(0, 2, 3)
    traced(tape.Variable(x))                    # traced with stop_gradient=True
    (trace,) = traced.traces.values()
    with pytest.raises(tape.InvalidArgumentError, match="wants a gradient"):
        tape.Tape().run(trace.info, {"Arg0": [tape.Variable(x, stop_gradient=False)]}, None)


def test_an_id_argument_an_unused_result_and_no_grad(mode):
    """Word ids as an argument (no gradient), a lookup of a captured table inside, and a
    second result nothing reads (its gradient stands in as zeros): bit for bit."""
    tape.seed(4)
    table = layers.Embedding(10, 4)

    def embedded(ids, x):
        e = table(ids)
        return ops.tanh(e + x), ops.exp(e)
    traced = tape.function(embedded)
    ids = tape.Variable(np.array([3, 7], np.int64))
    x = tape.Variable(floats(8, 2, 4), stop_gradient=False)
    results = []
    for f in (embedded, traced):
        x.grad = table.params()[0].grad = None
        tape.reset_global_tape()
        out, _ = f(ids, x)
        ops.reduce_sum(out * out).backward()
        results.append([out.numpy(), x.grad.numpy(), table.params()[0].grad.numpy()])
        with tape.no_grad():
            out, _ = f(ids, x)
        assert out.stop_gradient
        results[-1].append(out.numpy())
    for got, want in zip(results[1], results[0], strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("workload", ["forest", "char_lm_16"])
def test_the_benchmark_models_with_traced_cells_train_as_the_plain_ones(workload):
    """benchmarks/dynamic.py's rows "cells as tape.function": the same loss bit for bit and
    the same gradients within float32 rounding as the plain models, eagerly."""
    benchmarks = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
    sys.path.insert(0, str(benchmarks))
    try:
        import dynamic_models as models
    finally:
        sys.path.pop(0)
    samples, plain, traced = {
        "forest": (models.forest_samples, models.forest_tape, models.forest_traced_tape),
        "char_lm_16": (models.char_batch_samples, models.char_lm_16_tape,
                       models.char_lm_16_traced_tape)}[workload]
    data = samples(np.random.default_rng(0))
    results = []
    for build in (plain, traced):
        tape.seed(0)
        params, (loss_of,) = build(tape, data)
        tape.reset_global_tape()
        loss = loss_of()
        loss.backward()
        results.append((loss.numpy(), [p.grad.numpy() for p in params]))
    (loss, grads), (traced_loss, traced_grads) = results
    np.testing.assert_array_equal(traced_loss, loss)
    for got, want in zip(traced_grads, grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def test_a_repeated_lazy_graph_and_a_nested_function_equal_eager():
    """The same one-sample graph every iteration (a lazy tape's cached backward runs it from
    its second backward on), with a function called inside another (inlined in its trace)."""
    cell, linear = make_cell()
    inner = tape.function(lambda x, h: cell(x, h)[0])
    outer = tape.function(lambda x, h: inner(x, inner(x, h)))
    x = tape.Variable(floats(9, 1, 4), stop_gradient=False)
    h = tape.Variable(floats(10, 1, 3), stop_gradient=False)

    def chain(f):
        def run(x, h):
            out = f(x, h)
            return out, out
        return run
    expected = run_cell(chain(lambda x, h: cell(x, cell(x, h)[0])[0]), linear, x, h)
    for _ in range(3):
        with tape.lazy():
            got = run_cell(chain(outer), linear, x, h)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)
    (trace,) = outer.traces.values()
    assert not inner.traces and trace.info.type.startswith("function__lambda_")


def test_forward_values_are_kept_for_the_grad_call_and_bounded(monkeypatch):
    """The grad call takes the values its forward call computed; values nobody takes (no_grad
    calls on arguments that stay alive) are dropped past ForwardValues.LIMIT, and a grad call
    that finds none computes them again."""
    from tape.function_op import ForwardValues
    monkeypatch.setattr(ForwardValues, "LIMIT", 4)
    taken, stores = [], set()
    take, keep = ForwardValues.take, ForwardValues.keep

    def taking(self, inputs):
        taken.append(take(self, inputs))
        return taken[-1]

    def keeping(self, *kept):
        stores.add(self)
        keep(self, *kept)
    monkeypatch.setattr(ForwardValues, "take", taking)
    monkeypatch.setattr(ForwardValues, "keep", keeping)
    traced = tape.function(lambda x: ops.split(x, num=2, axis=1)[0] * 2.0)
    alive = [tape.Variable(floats(1, 2, 4), stop_gradient=False) for _ in range(6)]
    x = tape.Variable(floats(0, 2, 4), stop_gradient=False)
    expected = np.repeat([[2.0, 2.0, 0.0, 0.0]], 2, 0)
    for nobody_takes in (0, 6):
        x.grad = None
        tape.reset_global_tape()
        y = traced(x)
        with tape.no_grad():
            for v in alive[:nobody_takes]:
                traced(v)
        ops.reduce_sum(y).backward()
        np.testing.assert_array_equal(x.grad.numpy(), expected)
        (store,) = stores
        assert len(store.kept) <= ForwardValues.LIMIT
    assert taken[0] is not None and taken[1] is None


def test_forward_values_go_with_their_first_input_array(monkeypatch):
    """Values kept for a grad call nobody makes are dropped as the call's first input array
    is freed (its watch), not only past ForwardValues.LIMIT."""
    from tape.function_op import ForwardValues
    stores, keep = set(), ForwardValues.keep

    def keeping(self, *kept):
        stores.add(self)
        keep(self, *kept)
    monkeypatch.setattr(ForwardValues, "keep", keeping)
    traced = tape.function(lambda x: ops.tanh(x) * 2.0)
    x = tape.Variable(floats(0, 2, 3), stop_gradient=False)
    kept = [traced(x), traced(tape.Variable(floats(1, 2, 3), stop_gradient=False))]
    (store,) = stores
    assert len(store.kept) == 2
    del kept
    tape.reset_global_tape()
    assert len(store.kept) == 1      # x's array lives on
    del x
    assert not store.kept
