"""relu6, hard_sigmoid, hard_swish, swish, silu, mish, elu, selu and prelu against live
PaddlePaddle at the points the generic test keeps away from (the kinks, large |X|), their bad
inputs, and tape.functional's names for them."""
import numpy as np
import pytest
from paddle_compare import DTYPES, compare, paddle_results
from paddle_ops import needs_paddle

import tape
from tape import functional as F
from tape import ops

# Paddle holds FLOAT attributes as float32: the cases give values float32 holds exactly
_SLOPE, _SCALE, _ALPHA = (float(np.float32(v)) for v in (0.2, 1.0507009873554805,
                                                          1.6732632423543772))
_X = [-30.0, -5.0, -3.0, -1.0, 0.0, 0.5, 2.5, 3.0, 5.0, 6.0, 7.0, 30.0]
_GRID = np.linspace(-3.0, 3.0, 24).reshape(2, 3, 4)
# name: (op type, {slot: values}, attrs, inputs that get a gradient)
CASES = {
    "relu6": ("relu6", {"X": _X}, {}, ["X"]),
    "hard_sigmoid": ("hard_sigmoid", {"X": _X}, {"slope": _SLOPE}, ["X"]),
    "hard_sigmoid_quarter": ("hard_sigmoid", {"X": _X}, {"slope": 0.25, "offset": 0.5}, ["X"]),
    "hard_sigmoid_negative": ("hard_sigmoid", {"X": _X}, {"slope": -0.375, "offset": 0.25},
                              ["X"]),
    "hard_swish": ("hard_swish", {"X": _X}, {}, ["X"]),
    "hard_swish_attrs": ("hard_swish", {"X": _X}, {"threshold": 4.0, "scale": 5.0, "offset": 1.0},
                         ["X"]),
    "swish": ("swish", {"X": _X}, {}, ["X"]),
    "silu": ("silu", {"X": _X}, {}, ["X"]),
    "mish": ("mish", {"X": _X}, {}, ["X"]),
    "mish_threshold": ("mish", {"X": _X}, {"threshold": 1.0}, ["X"]),
    "elu": ("elu", {"X": _X}, {}, ["X"]),
    "elu_negative_alpha": ("elu", {"X": _X}, {"alpha": -0.5}, ["X"]),
    "selu": ("selu", {"X": _X}, {"scale": _SCALE, "alpha": _ALPHA}, ["X"]),
    "selu_attrs": ("selu", {"X": _X}, {"scale": 1.5, "alpha": 0.5}, ["X"]),
    "prelu_all": ("prelu", {"X": _GRID, "Alpha": [0.25]}, {"mode": "all"}, ["X", "Alpha"]),
    "prelu_channel": ("prelu", {"X": _GRID, "Alpha": [0.1, -0.2, 0.3]}, {"mode": "channel"},
                      ["X", "Alpha"]),
    "prelu_channel_nhwc": ("prelu", {"X": _GRID, "Alpha": [0.1, 0.2, 0.3, 0.4]},
                           {"mode": "channel", "data_format": "NHWC"}, ["X", "Alpha"]),
    "prelu_element": ("prelu", {"X": _GRID, "Alpha": np.linspace(-1, 1, 12).reshape(1, 3, 4)},
                      {"mode": "element"}, ["X", "Alpha"]),
    # Paddle checks only the dims past the first: an Alpha of X's own shape uses its first
    # sample's slopes, and the rest get zero gradient
    "prelu_element_long_alpha": ("prelu", {"X": _GRID, "Alpha": np.linspace(-1, 1, 24).reshape(
        2, 3, 4)}, {"mode": "element"}, ["X", "Alpha"]),
}
# Paddle 3.3.1 is wrong in these (each must still differ from Tape, else drop it)
PADDLE_BUGS = {
    "hard_swish_attrs": "its hard_swish kernel ignores threshold, scale and offset (always 6, "
                        "6, 3)",
    "mish_threshold": "its mish_grad takes d softplus / dX as 1 - exp(-softplus) also above the "
                      "threshold, where softplus = X and the derivative is 1 (a jump of "
                      "X (1 - tanh(X)^2) exp(-X) from the derivative of its own Out)",
    "selu@float64": "its float64 selu_grad rounds scale * alpha to float32 (the attributes' "
                    "type) before adding it to Out, so dX is off by up to 1e-7 of it",
}


@pytest.fixture(scope="module")
def paddle(tmp_path_factory):
    return paddle_results(tmp_path_factory, CASES)


@needs_paddle
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_paddle(paddle, case, dtype):
    compare(CASES, paddle, case, dtype, PADDLE_BUGS)


def test_kinks_take_paddles_side():
    """At a kink the gradient is Paddle's: relu6 0 at Out = 0 and 6, hard_swish the right
    slope (0 at X = -3, 1 at X = 3)."""
    _, grads = tape.testing.vjp("relu6", {"X": np.array([0.0, 6.0, 3.0])}, {},
                                {"Out": np.ones(3)})
    np.testing.assert_array_equal(grads["X"][0], [0.0, 0.0, 1.0])
    _, grads = tape.testing.vjp("hard_swish", {"X": np.array([-3.0, 3.0, 0.0])}, {},
                                {"Out": np.ones(3)})
    np.testing.assert_allclose(grads["X"][0], [0.0, 1.0, 0.5])


@pytest.mark.parametrize("op_type, attrs, message", [
    ("selu", {"scale": -1.0}, "scale > 0"),
    ("selu", {"alpha": -0.5}, "alpha >= 0"),
    ("hard_swish", {"threshold": 0.0}, "threshold must be > 0"),
    ("hard_swish", {"scale": -6.0}, "scale must be > 0"),
])
def test_bad_attributes_are_named(op_type, attrs, message):
    with pytest.raises(tape.InvalidArgumentError, match=message) as error:
        getattr(ops, op_type)(tape.Variable(np.ones(3)), **attrs)
    assert op_type in str(error.value)


@pytest.mark.parametrize("x_shape, alpha_shape, attrs, message", [
    ((2, 3, 4), (4,), {"mode": "channel"}, "Alpha of 3 value"),
    ((2, 3, 4), (3,), {"mode": "channel", "data_format": "NHWC"}, "Alpha of 4 value"),
    ((3,), (1,), {"mode": "channel"}, "rank >= 2"),
    ((2, 3, 4), (2,), {"mode": "all"}, "Alpha of 1 value"),
    ((2, 3, 4), (12,), {"mode": "element"}, "Alpha of X's rank"),
    ((2, 3, 4), (1, 3, 3), {"mode": "element"}, "holds 9 values"),
])
def test_prelu_rejects_alpha_of_the_wrong_size(x_shape, alpha_shape, attrs, message):
    with pytest.raises(tape.InvalidArgumentError, match=message) as error:
        ops.prelu(tape.Variable(np.ones(x_shape)), tape.Variable(np.ones(alpha_shape)), **attrs)
    assert "prelu" in str(error.value) and str(x_shape).replace(" ", "") in \
        str(error.value).replace(" ", "")


def test_prelu_rejects_an_alpha_of_another_dtype():
    with pytest.raises(tape.InvalidArgumentError, match="float32"):
        ops.prelu(tape.Variable(np.ones(3, np.float32)), tape.Variable(np.ones(1)))


def test_integer_inputs_are_rejected():
    with pytest.raises(tape.InvalidArgumentError, match="relu6.*floating point"):
        ops.relu6(tape.Variable(np.arange(3)))


def test_functional_names_match_the_ops():
    x = tape.Variable(np.linspace(-4.0, 4.0, 12).reshape(1, 3, 4))
    expect = {
        F.relu6(x): ops.relu6(x), F.hardswish(x): ops.hard_swish(x),
        F.hardsigmoid(x): ops.hard_sigmoid(x, slope=0.1666667), F.swish(x): ops.swish(x),
        F.silu(x): ops.silu(x), F.mish(x): ops.mish(x), F.elu(x, 0.5): ops.elu(x, alpha=0.5),
        F.selu(x): ops.selu(x),
        F.prelu(x, np.array([0.5])): ops.prelu(x, tape.Variable(np.array([0.5]))),
        F.prelu(x, np.array([0.1, 0.2, 0.3])): ops.prelu(
            x, tape.Variable(np.array([0.1, 0.2, 0.3])), mode="channel"),
        F.prelu(x, np.array([0.1, 0.2, 0.3, 0.4]), data_format="NLC"): ops.prelu(
            x, tape.Variable(np.array([0.1, 0.2, 0.3, 0.4])), mode="channel",
            data_format="NHWC"),
    }
    for got, want in expect.items():
        np.testing.assert_array_equal(got.value(), want.value())
    np.testing.assert_allclose(F.hardsigmoid(x).value(),
                               np.clip(x.value() * 0.1666667 + 0.5, 0, 1), rtol=1e-12)


def test_functional_rejects_what_paddle_rejects():
    x = tape.Variable(np.ones((2, 3)))
    with pytest.raises(tape.InvalidArgumentError, match="scale > 1"):
        F.selu(x, scale=0.5)
    with pytest.raises(tape.InvalidArgumentError, match="1-D weight"):
        F.prelu(x, np.ones((3, 1)))
    with pytest.raises(tape.InvalidArgumentError, match="data_format"):
        F.prelu(x, np.ones(3), data_format="CHW")


def test_prelu_trains_its_slope():
    """The slope is a parameter: a step moves it along the summed gradient of X * dOut where
    X <= 0."""
    x = tape.Variable(np.array([[-2.0, 1.0], [-1.0, 3.0]]))
    alpha = tape.Variable(np.array([0.25]), stop_gradient=False)
    F.prelu(x, alpha).sum().backward()
    np.testing.assert_allclose(alpha.grad.value(), [-3.0])
