"""The eager tape: recording, backward, accumulation, release, threads, no_grad, Variable API."""
import gc
import threading
import weakref

import numpy as np
import pytest

import tape
from tape import Variable, ops


def param(shape, seed=0):
    return Variable(np.random.default_rng(seed).uniform(0.5, 1.5, shape), stop_gradient=False)


def constant(shape, seed=1):
    return Variable(np.random.default_rng(seed).uniform(0.5, 1.5, shape))


# ---- gradients: accumulation and zeros ----

@pytest.mark.parametrize("x_used_first", [True, False])
def test_gradient_parts_are_summed_without_writing_arrays_others_hold(x_used_first):
    """h's gradient is the sum of three parts; elementwise_add_grad hands that sum on to x
    unchanged, where it meets x's own part: summing into it in place would corrupt both."""
    x, c, a, b, d = param((3,)), *(constant((3,), seed) for seed in (1, 2, 3, 4))
    total = tape.ops.reduce_sum(x * d) if x_used_first else None
    h = x + c
    parts = [tape.ops.reduce_sum(h * a), tape.ops.reduce_sum(h * b), tape.ops.reduce_sum(h)]
    if not x_used_first:
        parts.append(tape.ops.reduce_sum(x * d))
    for part in parts:
        total = part if total is None else total + part
    total.backward()
    expected = a.value() + b.value() + 1 + d.value()
    np.testing.assert_allclose(x.grad.value(), expected, rtol=1e-12)
    tape.reset_global_tape()
    (tape.ops.reduce_sum(x * d) + tape.ops.reduce_sum(x * d)).backward()   # accumulates
    np.testing.assert_allclose(x.grad.value(), expected + 2 * d.value(), rtol=1e-12)


def test_one_gradient_array_handed_to_two_variables_is_summed_into_neither():
    """elementwise_add_grad gives u and v the very same array; each then gets another part."""
    u, v, a, b = param((3,), 0), param((3,), 1), constant((3,), 2), constant((3,), 3)
    p, q = tape.ops.reduce_sum(u * a), tape.ops.reduce_sum(v * b)
    (p + q + tape.ops.reduce_sum(u + v)).backward()
    np.testing.assert_allclose(u.grad.value(), a.value() + 1, rtol=1e-12)
    np.testing.assert_allclose(v.grad.value(), b.value() + 1, rtol=1e-12)


def test_a_scalar_used_many_times_sums_its_gradient():
    x = param(())
    total = x
    for _ in range(4):
        total = total + x * x
    total.backward()
    np.testing.assert_allclose(x.grad.value(), 1 + 4 * 2 * x.value(), rtol=1e-12)


def test_variable_used_twice_by_one_op_gets_both_gradients():
    x = param((3, 4))
    (x * x).backward()
    np.testing.assert_allclose(x.grad.value(), 2 * x.value())


def test_variable_used_by_two_ops_gets_the_sum():
    x, w = param((3, 4), 0), param((3, 4), 1)
    loss = x * w + (x + w)
    loss.backward()
    np.testing.assert_allclose(x.grad.value(), w.value() + 1)
    np.testing.assert_allclose(w.grad.value(), x.value() + 1)


def test_recorded_op_off_the_loss_path_contributes_nothing():
    x, w = param((3,), 0), param((3,), 1)
    unused = x * w  # noqa: F841  recorded, but the loss does not depend on it
    (x + w).backward()
    np.testing.assert_array_equal(x.grad.value(), np.ones(3))
    np.testing.assert_array_equal(w.grad.value(), np.ones(3))


def _logits_and_label():
    logits = Variable(np.random.default_rng(0).standard_normal((4, 5)), stop_gradient=False)
    label = Variable(np.array([[0], [3], [4], [1]], dtype=np.int64))
    return logits, label


def test_loss_output_alone_feeds_the_gradient():
    logits, label = _logits_and_label()
    softmax, loss = ops.softmax_with_cross_entropy(logits, label)
    loss.backward()
    onehot = np.eye(5)[label.value()[:, 0]]
    np.testing.assert_allclose(logits.grad.value(), softmax.value() - onehot, rtol=1e-12)


def test_output_without_gradient_is_given_zeros():
    # softmax_with_cross_entropy_grad always reads Loss@GRAD: when only Softmax feeds the loss,
    # backward fills Loss@GRAD with zeros, and the gradient is Softmax's alone.
    logits, label = _logits_and_label()
    softmax, _ = ops.softmax_with_cross_entropy(logits, label)
    c = constant((4, 5))
    (softmax * c).backward()
    s, cv = softmax.value(), c.value()
    expected = s * (cv - (cv * s).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(logits.grad.value(), expected, rtol=1e-12)


def test_gradients_through_both_outputs_add_up():
    logits, label = _logits_and_label()
    softmax, loss = ops.softmax_with_cross_entropy(logits, label)
    (ops.mean(loss) + ops.mean(softmax * constant((4, 5)))).backward()
    both = logits.grad.value()
    for part in ("loss", "softmax"):
        tape.reset_global_tape()
        logits.grad = None
        softmax, loss = ops.softmax_with_cross_entropy(logits, label)
        (ops.mean(loss) if part == "loss" else ops.mean(softmax * constant((4, 5)))).backward()
        both = both - logits.grad.value()
    np.testing.assert_allclose(both, 0, atol=1e-15)


# ---- release ----

def test_activation_no_gradient_needs_dies_with_the_user_reference():
    x, w, b = param((3, 4), 0), param((3, 4), 1), param((3, 4), 2)
    h = x * w           # elementwise_mul keeps x and w
    y = h + b           # elementwise_add keeps no buffer: h is not needed for backward
    h_ref, h_array_ref = weakref.ref(h), weakref.ref(h.value())
    del h
    gc.collect()
    assert h_ref() is None and h_array_ref() is None
    y.backward()
    np.testing.assert_allclose(x.grad.value(), w.value())


def test_backward_frees_what_it_kept():
    x, w, v = param((3, 4), 0), param((3, 4), 1), param((3, 4), 2)
    h = x * w
    y = h * v           # keeps h (v's gradient reads it) and v
    h_ref, h_array_ref = weakref.ref(h), weakref.ref(h.value())
    del h
    gc.collect()
    assert h_ref() is not None, "the tape should keep h until backward"
    global_tape = tape.get_global_tape()
    assert len(global_tape) == 2
    y.backward()
    gc.collect()
    assert h_ref() is None and h_array_ref() is None
    assert len(global_tape) == 0
    np.testing.assert_allclose(v.grad.value(), x.value() * w.value())


def test_second_backward_is_a_clear_error():
    x = param((2,))
    y = x * x
    y.backward()
    with pytest.raises(tape.PreconditionNotMetError, match="already run.*reset_global_tape"):
        y.backward()


def test_the_first_op_after_backward_starts_a_new_global_tape():
    x, c = param((3,)), constant((3,))
    loss = x * c
    spent = tape.get_global_tape()
    loss.backward()
    again = x * c                     # no reset_global_tape(): as PyTorch users write it
    assert tape.get_global_tape() is not spent and again._tape == tape.get_global_tape().serial
    x.grad = None
    again.backward()
    np.testing.assert_allclose(x.grad.value(), c.value())
    with pytest.raises(tape.PreconditionNotMetError, match=r"backward has spent .*detach\(\)"):
        loss * c                      # a Variable of the spent tape
    with pytest.raises(tape.PreconditionNotMetError, match="earlier tape, which backward has"):
        loss.backward()


def test_an_explicit_tape_stays_spent():
    recorder = tape.Tape()
    x = param((2,))
    (y,) = recorder.add_op("square", {"X": [x]})["Out"]
    recorder.backward(y)
    with pytest.raises(tape.PreconditionNotMetError, match="spent by backward"):
        recorder.add_op("square", {"X": [x]})


# ---- tapes: threads, no_grad, reset ----

def test_each_thread_records_on_its_own_tape():
    main_tape = tape.get_global_tape()
    seen = {}

    def worker():
        x = param((2,))
        y = x * x
        seen["tape"], seen["len"] = tape.get_global_tape(), len(tape.get_global_tape())
        y.backward()
        seen["grad"] = x.grad.value()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen["tape"] is not main_tape and seen["len"] == 1
    assert len(main_tape) == 0
    np.testing.assert_allclose(seen["grad"], 2 * np.random.default_rng(0).uniform(0.5, 1.5, 2))


def test_no_grad_records_nothing():
    x, w = param((2, 3), 0), param((2, 3), 1)
    with tape.no_grad():
        y = x * w
        z = y + w
    assert len(tape.get_global_tape()) == 0
    assert y.stop_gradient and z.stop_gradient
    np.testing.assert_allclose(z.value(), x.value() * w.value() + w.value())
    assert not (x * w).stop_gradient and len(tape.get_global_tape()) == 1


def test_stale_variable_after_reset_asks_for_detach():
    x = param((3,))
    y = x * x
    tape.reset_global_tape()
    with pytest.raises(tape.PreconditionNotMetError, match=r"since been reset.*detach\(\)"):
        y * x
    z = y.detach() * x
    z.backward()
    np.testing.assert_allclose(x.grad.value(), x.value() ** 2)


def test_parameter_gradient_accumulates_until_cleared():
    x, c = param((3,)), constant((3,))
    for expected in (1, 2):
        tape.reset_global_tape()
        (x * c).backward()
        np.testing.assert_allclose(x.grad.value(), expected * c.value())
    x.grad = None
    tape.reset_global_tape()
    (x * c).backward()
    np.testing.assert_allclose(x.grad.value(), c.value())


def test_long_chain_backward_needs_no_recursion():
    x, c = param((2,)), constant((2,))
    y = x
    for _ in range(10_000):
        y = y + c
    assert len(tape.get_global_tape()) == 10_000
    y.backward()
    np.testing.assert_array_equal(x.grad.value(), np.ones(2))


def test_tape_length_and_iteration():
    x, w, b = param((2, 3), 0), param((2, 3), 1), constant((2, 3))
    y = x * w + b
    recorded = list(tape.get_global_tape())
    assert len(tape.get_global_tape()) == 2
    assert all(isinstance(h, tape.OpHandle) for h in recorded)
    assert [h.type for h in recorded] == ["elementwise_mul", "elementwise_add"]
    assert recorded[-1].outputs["Out"][0].name == y.name


# ---- Variable API and operators ----

def test_variable_api():
    array = np.arange(6.0).reshape(2, 3)
    v = Variable(array, name="api_check", stop_gradient=False)
    assert v.value() is array and np.asarray(v) is array
    assert v.name == "api_check" and v.shape == (2, 3) and v.dtype == np.float64
    assert not v.stop_gradient and v.grad is None and v.is_leaf
    assert Variable(1.5).dtype == np.float32 and Variable(np.ones(2)).stop_gradient
    (v * v).backward()
    assert v.grad.name == "api_check@GRAD"
    np.testing.assert_allclose(v.grad.value(), 2 * array)


X = np.array([[0.5, -1.5, 2.0], [1.25, -0.75, 3.0]])
W = np.array([[1.0, -2.0], [0.5, 1.5], [-1.0, 0.25]])

# expression, expected value, expected d(sum of the expression)/dx, given x = X
OVERLOADS = [
    ("x + 2", lambda x: x + 2, X + 2, np.ones_like(X)),
    ("2 + x", lambda x: 2 + x, 2 + X, np.ones_like(X)),
    ("x - 2", lambda x: x - 2, X - 2, np.ones_like(X)),
    ("2 - x", lambda x: 2 - x, 2 - X, -np.ones_like(X)),
    ("x * 3", lambda x: x * 3, X * 3, 3 * np.ones_like(X)),
    ("3 * x", lambda x: 3 * x, 3 * X, 3 * np.ones_like(X)),
    ("x / 4", lambda x: x / 4, X / 4, np.full_like(X, 0.25)),
    ("4 / x", lambda x: 4 / x, 4 / X, -4 / X**2),
    ("-x", lambda x: -x, -X, -np.ones_like(X)),
    ("x + x", lambda x: x + x, 2 * X, 2 * np.ones_like(X)),
    ("x - x * x", lambda x: x - x * x, X - X * X, 1 - 2 * X),
    ("x / (x * x)", lambda x: x / (x * x), 1 / X, -1 / X**2),
]


@pytest.mark.parametrize("text, expression, value, grad", OVERLOADS,
                         ids=[o[0] for o in OVERLOADS])
def test_operator_overloads(text, expression, value, grad):
    x = Variable(X.copy(), stop_gradient=False)
    y = expression(x)
    assert isinstance(y, Variable) and y.dtype == np.float64
    np.testing.assert_allclose(y.value(), value, rtol=1e-12)
    y.backward()
    np.testing.assert_allclose(x.grad.value(), grad, rtol=1e-12)


def test_matmul_operator():
    x, w = Variable(X.copy(), stop_gradient=False), Variable(W.copy(), stop_gradient=False)
    y = x @ w
    np.testing.assert_allclose(y.value(), X @ W, rtol=1e-12)
    y.backward()
    np.testing.assert_allclose(x.grad.value(), np.ones((2, 2)) @ W.T, rtol=1e-12)
    np.testing.assert_allclose(w.grad.value(), X.T @ np.ones((2, 2)), rtol=1e-12)


def test_scalar_operators_keep_float32():
    x = Variable(np.ones(3, np.float32), stop_gradient=False)
    for y in (x + 1, 1 - x, x * 2.5, 2 / x, -x, x / 3):
        assert y.dtype == np.float32, y


def test_tracing_tape_records_every_op_and_keeps_every_value():
    traced = tape.Tape(tracing=True)
    x = Variable(np.ones((2, 3)))                     # stop_gradient: no gradient anywhere
    (y,) = traced.add_op("relu", {"X": [x]})["Out"]
    (z,) = traced.add_op("scale", {"X": [y]}, attrs={"scale": 2.0})["Out"]
    assert [h.type for h in traced] == ["relu", "scale"]
    relu, scale = list(traced)
    assert relu.inputs["X"][0] is x and relu.outputs["Out"][0] is y and scale.inputs["X"][0] is y
    assert z.stop_gradient and y.stop_gradient      # recorded for export, not differentiable


def test_item_needs_exactly_one_element():
    assert tape.Variable(np.array([[3]])).item() == 3
    with pytest.raises(tape.InvalidArgumentError, match=r"item\(\): the value has 2 elements "
                                                        r"\[2\]; item\(\) needs exactly one"):
        tape.Variable(np.ones(2)).item()


def test_signatures_tell_apart_which_dispensable_slot_an_input_came_from(user_ops):
    """Two calls whose inputs have the same shapes, in different optional slots, are different
    signatures: each gets its own shape answer."""
    from tape.registry import Slot, kernel, register_op

    def rule(ctx):
        if ctx.has_input("A"):
            ctx.set_output("Out", (1, *ctx.input("A").shape), ctx.input("A").dtype)
        else:
            ctx.set_output("Out", (*ctx.input("B").shape, 1), ctx.input("B").dtype)

    register_op("user_lift", inputs=[Slot("A", dispensable=True), Slot("B", dispensable=True)],
                outputs=["Out"], infer_shape=rule)
    kernel("user_lift")(lambda A, B: A[None] if A is not None else B[..., None])
    v = Variable(np.arange(3.0))
    for slot, shape in (("A", (1, 3)), ("B", (3, 1)), ("A", (1, 3))):
        out = ops.user_lift(**{slot: v})
        assert out.shape == out.value().shape == shape


def test_a_copied_temporary_desc_names_the_same_variable():
    """Temporaries are named on first use; a copy made before that still has the same name."""
    import copy
    y = param((3,)) * 2.0
    assert copy.copy(y.desc).name == y.desc.name == copy.deepcopy(y.desc).name
