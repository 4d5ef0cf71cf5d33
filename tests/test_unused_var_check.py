"""FLAGS_enable_unused_var_check: an input an op declares but its kernel never reads is an error.

The whole suite runs with the check on (tests/conftest.py), so every registered op passes it;
here deliberately faulty ops and grad makers show that it fires, with Paddle's message.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import tape
from tape.kernel_binding import body_loads
from tape.ops.rules import float_same_as
from tape.registry import REGISTRY, GradOp, Slot, kernel, register_op
from tape.unused_var_whitelist import UNUSED_VAR_WHITELIST

WHITELIST_FILE = "tape/unused_var_whitelist.py"


def run(op_type, **inputs):
    """Run ``op_type`` on the global tape; ``inputs`` maps slot -> Variable."""
    return tape.get_global_tape().add_op(op_type, {s: [v] for s, v in inputs.items()})


def variable(*values, stop_gradient=True):
    return tape.Variable(np.array(values), stop_gradient=stop_gradient)


def assert_unused_message(message, op_type, names):
    assert (f"Unused input variables check failed: operator {op_type} has input(s) not used: "
            f"{names}; please make sure it(them) is(are) needed") in message, message
    assert "If not, remove it(them) from" in message, message
    assert "register it(them) as no-need-buffer" in message, message
    assert f"white list in {WHITELIST_FILE}" in message, message


def test_the_suite_runs_with_the_check_on():
    assert tape.get_flags("FLAGS_enable_unused_var_check") == {
        "FLAGS_enable_unused_var_check": True}


def test_an_input_the_kernel_never_reads_fails(user_ops):
    register_op("user_ignores_y", inputs=["X", "Y"], outputs=["Out"],
                infer_shape=float_same_as("X"))
    kernel("user_ignores_y")(lambda X, Y: 2 * X)
    with pytest.raises(tape.PermissionDeniedError) as error:
        run("user_ignores_y", X=variable(1.0, 2.0), Y=variable(3.0, 4.0))
    assert_unused_message(str(error.value), "user_ignores_y", "Y")


def test_a_slot_the_kernel_has_no_parameter_for_fails(user_ops):
    register_op("user_no_param", inputs=["X", "Y", "Z"], outputs=["Out"],
                infer_shape=float_same_as("X"))
    kernel("user_no_param")(lambda Y: -Y)
    with pytest.raises(tape.PermissionDeniedError) as error:
        run("user_no_param", X=variable(1.0), Y=variable(2.0), Z=variable(3.0))
    assert_unused_message(str(error.value), "user_no_param", "X, Z")


def test_a_grad_maker_that_keeps_what_its_kernel_never_reads_fails(user_ops):
    # exp's gradient needs only Out; declaring X as read keeps it alive until backward
    register_op("user_exp", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"),
                grad=GradOp(reads=["X", "Out"]))
    kernel("user_exp")(lambda X: np.exp(X))
    kernel("user_exp_grad")(lambda Out, dOut: Out * dOut)
    x = variable(0.5, 1.0, stop_gradient=False)
    y = run("user_exp", X=x)["Out"][0]
    with pytest.raises(tape.PermissionDeniedError) as error:
        tape.ops.reduce_sum(y).backward()
    message = str(error.value)
    assert_unused_message(message, "user_exp_grad", "X")
    assert "remove it(them) from the grad maker of user_exp" in message


def test_an_input_read_only_for_its_shape_must_be_no_need_buffer(user_ops):
    register_op("user_fill_like", inputs=["X", "Y"], outputs=["Out"],
                infer_shape=float_same_as("X"))
    kernel("user_fill_like")(lambda X, Y: np.full(Y.shape, 1.0, Y.dtype) + X)
    with pytest.raises(tape.PermissionDeniedError) as error:
        run("user_fill_like", X=variable(1.0, 2.0), Y=variable(3.0, 4.0))
    message = str(error.value)
    assert_unused_message(message, "user_fill_like", "Y")
    assert "reads only the shape/dtype of Y" in message


def test_a_no_need_buffer_input_passes(user_ops):
    register_op("user_add_like", inputs=["X", Slot("Y", no_need_buffer=True)], outputs=["Out"],
                infer_shape=float_same_as("X"), grad=GradOp(reads=["X"], no_need_buffer=["X"]))
    kernel("user_add_like")(lambda X, Y: X + np.ones(Y.shape, Y.dtype))

    @kernel("user_add_like_grad")
    def user_add_like_grad(X, dOut):
        return np.broadcast_to(dOut, X.shape).copy()

    x = variable(1.0, 2.0, stop_gradient=False)
    out = run("user_add_like", X=x, Y=variable(5.0, 6.0))["Out"][0]
    tape.ops.reduce_sum(out).backward()
    np.testing.assert_array_equal(x.grad.value(), [1.0, 1.0])
    assert REGISTRY["user_add_like_grad"].inputs[0].no_need_buffer


def test_an_input_with_no_value_is_skipped(user_ops):
    register_op("user_optional", inputs=["X", Slot("Bias", dispensable=True)], outputs=["Out"],
                infer_shape=float_same_as("X"))
    kernel("user_optional")(lambda X: X.copy())
    out = run("user_optional", X=variable(1.0))["Out"][0]
    np.testing.assert_array_equal(out.value(), [1.0])
    with pytest.raises(tape.PermissionDeniedError):
        run("user_optional", X=variable(1.0), Bias=variable(2.0))


def test_a_read_on_some_paths_counts_as_a_read(user_ops):
    """The check reads the kernel's body: an input it loads on any path is one it uses."""
    from tape.attribute import BOOLEAN, Attr
    register_op("user_maybe_y", inputs=["X", "Y"], outputs=["Out"],
                attrs=[Attr("use_y", BOOLEAN, True, "add Y")], infer_shape=float_same_as("X"))
    kernel("user_maybe_y")(lambda X, Y, use_y: X + Y if use_y else X.copy())
    x, y = variable(1.0), variable(2.0)
    for use_y, expected in ((True, 3.0), (False, 1.0)):
        out = tape.get_global_tape().add_op("user_maybe_y", {"X": [x], "Y": [y]},
                                            attrs={"use_y": use_y})
        np.testing.assert_array_equal(out["Out"][0].value(), [expected])


def test_a_kernel_parameter_must_name_a_slot_or_an_attribute(user_ops):
    register_op("user_ctx", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"))
    with pytest.raises(tape.NotFoundError, match="user_ctx: kernel .* has parameter 'ctx'"):
        kernel("user_ctx")(lambda X, ctx: X)


def test_the_static_executor_checks_too(user_ops, restore_flags):
    register_op("user_ignores_y", inputs=["X", "Y"], outputs=["Out"],
                infer_shape=float_same_as("X"))
    kernel("user_ignores_y")(lambda X, Y: 2 * X)
    tape.set_flags({"FLAGS_enable_unused_var_check": False})
    y = tape.Variable(np.ones((1, 2), np.float32), name="user_y")
    program = tape.static.trace(lambda x: run("user_ignores_y", X=x, Y=y)["Out"][0],
                                np.ones((1, 2), np.float32))
    tape.set_flags({"FLAGS_enable_unused_var_check": True})
    with pytest.raises(tape.PermissionDeniedError) as error:
        tape.static.Executor().run(program, {"input_0": np.ones((3, 2), np.float32)},
                                   program.fetch_names)
    assert_unused_message(str(error.value), "user_ignores_y", "Y")


def test_off_the_check_costs_nothing_and_says_nothing(user_ops, restore_flags):
    register_op("user_ignores_y", inputs=["X", "Y"], outputs=["Out"],
                infer_shape=float_same_as("X"))
    kernel("user_ignores_y")(lambda X, Y: 2 * X)
    tape.set_flags({"FLAGS_enable_unused_var_check": False})
    assert not tape.flags.checking
    out = run("user_ignores_y", X=variable(1.0), Y=variable(3.0))["Out"][0]
    np.testing.assert_array_equal(out.value(), [2.0])


def test_the_flag_is_read_from_the_environment():
    code = "import tape; print(tape.get_flags()['FLAGS_enable_unused_var_check'])"
    for value, expected in (("1", "True"), ("0", "False")):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "FLAGS_enable_unused_var_check": value},
                              check=True)
        assert done.stdout.strip() == expected


def test_body_loads_sees_closures_and_comprehensions_and_shape_only_reads():
    def kernel_fn(X, Y, Z, W, V, unused):
        total = sum(y for y in Y)                 # Y read in a generator
        scale = (lambda: Z * 2)()                # Z read in a closure
        return np.zeros(X.shape, X.dtype) + total + scale + W.ndim + V.size + V

    loaded, meta = body_loads(kernel_fn, {"X", "Y", "Z", "W", "V", "unused"})
    assert loaded == {"Y", "Z", "V"}
    assert meta - loaded == {"X", "W"}


def test_every_whitelist_entry_names_a_registered_op_and_a_reason():
    for op_type, reason in UNUSED_VAR_WHITELIST.items():
        assert op_type in REGISTRY, f"{WHITELIST_FILE}: {op_type} is not a registered op"
        assert len(reason.split()) >= 3, f"{WHITELIST_FILE}: {op_type} needs a reason"
