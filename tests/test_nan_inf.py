"""FLAGS_check_nan_inf: the first floating kernel output holding a NaN or an Inf is an error
naming the op, the output slot, the variable and how many values are bad."""
import re

import numpy as np
import pytest

import tape


@pytest.fixture
def check_nan_inf(restore_flags):
    tape.set_flags({"FLAGS_check_nan_inf": True})


def test_off_by_default_a_nan_passes_silently():
    assert not tape.get_flags("FLAGS_check_nan_inf")["FLAGS_check_nan_inf"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = tape.ops.log(tape.Variable(np.array([-1.0, 0.0, 1.0], np.float32)))
    assert np.isnan(out.value()[0])


def test_forward_output_names_op_slot_variable_and_count(check_nan_inf):
    x = tape.Variable(np.array([-1.0, 0.0, 1.0, 2.0], np.float32))
    with np.errstate(divide="ignore", invalid="ignore"), \
            pytest.raises(tape.PreconditionNotMetError) as error:
        tape.ops.log(x)
    message = str(error.value)
    assert re.search(r"FLAGS_check_nan_inf: operator log output Out \(tmp_\d+\) holds 2 "
                     r"NaN/Inf value\(s\) of 4 \(1 NaN, 1 Inf\)", message), message


def test_a_given_output_variable_is_named(check_nan_inf):
    x = tape.Variable(np.array([0.0, 1.0]), name="user_x")
    zero = tape.Variable(np.zeros(2), name="user_zero")
    out = tape.Variable(name="user_ratio")
    with np.errstate(divide="ignore", invalid="ignore"), \
            pytest.raises(tape.PreconditionNotMetError,
                          match=r"operator elementwise_div output Out \(user_ratio\) holds 2 "
                                r"NaN/Inf value\(s\) of 2 \(1 NaN, 1 Inf\)"):
        tape.get_global_tape().add_op("elementwise_div", {"X": [x], "Y": [zero]},
                                      {"Out": [out]})


def test_backward_names_the_gradient(check_nan_inf):
    # log is finite at the smallest float32 subnormal, its gradient 1/x is not
    x = tape.Variable(np.array([np.float32(1e-45), 1.0], np.float32), name="user_tiny",
                      stop_gradient=False)
    loss = tape.ops.reduce_sum(tape.ops.log(x))
    with np.errstate(over="ignore", divide="ignore"), \
            pytest.raises(tape.PreconditionNotMetError,
                          match=r"operator log_grad output X@GRAD \(user_tiny@GRAD\) holds 1 "
                                r"NaN/Inf value\(s\) of 2 \(0 NaN, 1 Inf\)"):
        loss.backward()


def test_the_static_executor_checks_too(check_nan_inf):
    program = tape.static.trace(lambda x: tape.ops.log(x), np.ones((1, 3), np.float32))
    (fetched,) = program.fetch_names
    exe = tape.static.Executor()
    exe.run(program, {"input_0": np.ones((2, 3), np.float32)}, [fetched])
    bad = np.array([[1.0, -1.0, -2.0]], np.float32)
    with np.errstate(invalid="ignore"), \
            pytest.raises(tape.PreconditionNotMetError,
                          match=rf"operator log output Out \({re.escape(fetched)}\) holds 2 "
                                rf"NaN/Inf value\(s\) of 3 \(2 NaN, 0 Inf\)"):
        exe.run(program, {"input_0": bad}, [fetched])


def test_integer_and_finite_outputs_pass(check_nan_inf):
    x = tape.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), stop_gradient=False)
    ids = tape.ops.cast(x, out_dtype=tape.dtypes.INT64)
    assert ids.value().dtype == np.int64
    tape.ops.mean(tape.ops.softmax(x)).backward()
    assert np.isfinite(x.grad.value()).all()
