"""Variable's operators, methods, indexing and repr (issue 11, point 1): values against numpy,
gradients against float64 central differences, numpy operands on both sides."""
import inspect

import numpy as np
import pytest

import tape
from tape import ops
from tape.testing import check_function_grad

RNG = np.random.default_rng(0)
X = RNG.uniform(0.5, 2.0, (2, 3, 4))      # positive: log, sqrt, pow and prod are smooth
Y = RNG.uniform(0.5, 2.0, (3, 4))
V = tape.Variable


def value(v):
    assert isinstance(v, tape.Variable), f"expected a Variable, received {type(v).__name__}"
    return v.value()


# ---- arithmetic with Variables, Python numbers and numpy values, on either side ----

OPERATORS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
}
OTHERS = {
    "variable": lambda: V(Y), "float": lambda: 1.5, "int": lambda: 2,
    "np.float32": lambda: np.float32(1.5), "np.float64 0-D array": lambda: np.array(1.5),
    "np.ndarray": lambda: Y, "np.ndarray float32": lambda: Y.astype(np.float32),
}


@pytest.mark.parametrize("other", OTHERS)
@pytest.mark.parametrize("op", OPERATORS)
def test_arithmetic_with_any_operand_on_either_side(op, other):
    f = OPERATORS[op]
    for dtype in (np.float32, np.float64):
        x, y = X.astype(dtype), OTHERS[other]()
        y_np = y if not isinstance(y, V) else Y.astype(dtype)
        y = V(y_np) if isinstance(y, V) else y
        left, right = f(V(x), y), f(y, V(x))
        assert left.dtype == dtype and right.dtype == dtype, (op, other, dtype)
        np.testing.assert_allclose(value(left), f(x, np.asarray(y_np, dtype)), rtol=1e-6)
        np.testing.assert_allclose(value(right), f(np.asarray(y_np, dtype), x), rtol=1e-6)


@pytest.mark.parametrize("other", ["variable", "float", "np.ndarray"])
@pytest.mark.parametrize("op", OPERATORS)
def test_arithmetic_gradients(op, other):
    f = OPERATORS[op]
    if other == "variable":
        check_function_grad(f, X, Y)
        check_function_grad(lambda a, b: f(b, a), X, Y)
    else:
        y = OTHERS[other]()
        check_function_grad(lambda a: f(a, y), X)
        check_function_grad(lambda a: f(y, a), X)


def test_numpy_on_the_left_stays_on_the_tape():
    x = V(X, stop_gradient=False)
    for result in (np.float32(2.0) * x, np.ones(4) * x, np.float64(1.0) - x, Y / x, Y @ x[0].T):
        assert isinstance(result, tape.Variable) and not result.is_leaf
    (np.ones(4) * x).sum().backward()
    np.testing.assert_array_equal(x.grad.value(), np.ones_like(X))


def test_matmul_unary_minus_and_abs():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    np.testing.assert_allclose(value(V(a) @ V(b)), a @ b, rtol=1e-12)
    np.testing.assert_allclose(value(V(a) @ b), a @ b, rtol=1e-12)
    np.testing.assert_allclose(value(a @ V(b)), a @ b, rtol=1e-12)
    np.testing.assert_allclose(value(V(a).matmul(V(b))), a @ b, rtol=1e-12)
    np.testing.assert_array_equal(value(-V(a)), -a)
    np.testing.assert_array_equal(value(abs(V(a))), np.abs(a))
    check_function_grad(lambda p, q: p @ q, a, b)
    check_function_grad(lambda p: -p, a)
    check_function_grad(abs, a + np.sign(a) * 0.1)


@pytest.mark.parametrize("name", ["<", "<=", ">", ">=", "==", "!="])
def test_comparisons_give_bool_variables(name):
    compare = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "==": np.equal, "!=": np.not_equal}[name]
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.array([3.0, 2.0, 1.0], np.float32)
    run = {"<": lambda p, q: p < q, "<=": lambda p, q: p <= q, ">": lambda p, q: p > q,
           ">=": lambda p, q: p >= q, "==": lambda p, q: p == q, "!=": lambda p, q: p != q}[name]
    for p, q in ((V(a), V(b)), (V(a), b), (a, V(b)), (V(a), 2.0), (2.0, V(b))):
        out = run(p, q)
        assert isinstance(out, tape.Variable) and out.dtype == np.bool_
        np.testing.assert_array_equal(out.value(), compare(np.asarray(p), np.asarray(q)))


def test_variables_keep_identity_hash_and_compare_to_other_objects_by_identity():
    a, b = V(np.ones(2)), V(np.ones(2))
    assert len({a, b}) == 2 and {a: 1, b: 2}[b] == 2
    assert (a == None) is False and (a != "a") is True   # noqa: E711


def test_integer_variables_are_refused_by_float_only_arithmetic_with_a_clear_error():
    with pytest.raises(tape.TapeError, match="elementwise_add: no kernel for .*int64"):
        V(np.arange(3)) + 1


# ---- methods ----

AXES = [None, 0, -1, (0, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_reductions(name, axis, keepdim):
    x = RNG.permutation(np.arange(24.0)).reshape(2, 3, 4) / 10 + 0.5   # distinct: max has no ties
    out = getattr(V(x), name)(axis=axis, keepdim=keepdim)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdim)
    np.testing.assert_allclose(value(out), want, rtol=1e-12)
    assert out.shape == np.shape(want)
    check_function_grad(lambda v: getattr(v, name)(axis, keepdim), x)


def test_prod_gradient_through_zeros_and_odd_lengths():
    x = np.array([[0.0, 2.0, 3.0, 0.5, 1.5], [1.0, 0.0, 0.0, 2.0, 1.0], [1, 2, 3, 4, 5]])
    np.testing.assert_allclose(value(V(x).prod(axis=1)), x.prod(axis=1))
    check_function_grad(lambda v: v.prod(axis=1), x)
    check_function_grad(lambda v: v.prod(), x[2:])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(name):
    x = RNG.standard_normal((3, 4))
    np.testing.assert_array_equal(value(getattr(V(x), name)()), getattr(np, name)(x))
    np.testing.assert_array_equal(value(getattr(V(x), name)(axis=1)), getattr(np, name)(x, 1))
    kept = getattr(V(x), name)(axis=0, keepdim=True)
    np.testing.assert_array_equal(value(kept), getattr(np, name)(x, 0, keepdims=True))
    assert kept.dtype == np.int64


SHAPING = {
    "reshape(6, -1)": (lambda v: v.reshape(6, -1), lambda a: a.reshape(6, -1)),
    "reshape((4, 6))": (lambda v: v.reshape((4, 6)), lambda a: a.reshape((4, 6))),
    "transpose()": (lambda v: v.transpose(), lambda a: a.transpose()),
    "transpose(1, 0, 2)": (lambda v: v.transpose(1, 0, 2), lambda a: a.transpose(1, 0, 2)),
    "transpose([2, 0, 1])": (lambda v: v.transpose([2, 0, 1]), lambda a: a.transpose(2, 0, 1)),
    "T": (lambda v: v.T, lambda a: a.T),
    "flatten()": (lambda v: v.flatten(), lambda a: a.flatten()),
    "flatten(1)": (lambda v: v.flatten(1), lambda a: a.reshape(2, 12)),
    "flatten(0, 1)": (lambda v: v.flatten(0, 1), lambda a: a.reshape(6, 4)),
    "unsqueeze(1)": (lambda v: v.unsqueeze(1), lambda a: a[:, None]),
    "unsqueeze([0, -1])": (lambda v: v.unsqueeze([0, 4]), lambda a: a[None, ..., None]),
    "squeeze()": (lambda v: v.unsqueeze(1).squeeze(), lambda a: a),
    "squeeze(1)": (lambda v: v.unsqueeze(1).squeeze(1), lambda a: a),
}


@pytest.mark.parametrize("name", SHAPING)
def test_shape_methods(name):
    method, reference = SHAPING[name]
    np.testing.assert_array_equal(value(method(V(X))), reference(X))
    check_function_grad(method, X)


UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "relu": lambda a: np.maximum(a, 0),
    "abs": np.abs,
    "softmax": lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True),
    "log_softmax": lambda a: a - np.log(np.exp(a).sum(-1, keepdims=True)),
}


@pytest.mark.parametrize("name", UNARY)
def test_unary_methods(name):
    x = X - 1.0 if name in ("relu", "abs", "tanh", "sigmoid", "softmax", "log_softmax") else X
    x = np.where(np.abs(x) < 0.05, 0.1, x)    # off the kinks of relu and abs
    np.testing.assert_allclose(value(getattr(V(x), name)()), UNARY[name](x), rtol=1e-12)
    check_function_grad(lambda v: getattr(v, name)(), x)


def test_softmax_axis():
    e = np.exp(X)
    np.testing.assert_allclose(value(V(X).softmax(axis=1)), e / e.sum(1, keepdims=True))
    check_function_grad(lambda v: v.log_softmax(0), X)


def test_astype_and_clip():
    x = V(X)
    assert x.astype("float32").dtype == np.float32 and x.astype(np.float64) is x
    np.testing.assert_array_equal(value(x.astype(np.int64)), X.astype(np.int64))
    check_function_grad(lambda v: v.astype(np.float32).astype(np.float64) * 1.0, X)
    np.testing.assert_array_equal(value(x.clip(0.8, 1.5)), np.clip(X, 0.8, 1.5))
    np.testing.assert_array_equal(value(x.clip(min=1.0)), np.maximum(X, 1.0))
    np.testing.assert_array_equal(value(x.clip(max=1.0)), np.minimum(X, 1.0))
    check_function_grad(lambda v: v.clip(0.8, 1.5), np.where(np.abs(X - 0.8) < 0.02, 1, X))


def test_ndim_size_len_iter():
    x = V(X)
    assert (x.ndim, x.size, len(x)) == (3, 24, 2)
    assert V(np.float32(1)).ndim == 0 and V(np.float32(1)).size == 1
    rows = list(x)
    assert len(rows) == 2 and all(r.shape == (3, 4) for r in rows)


# ---- indexing ----

A = np.arange(60.0).reshape(3, 4, 5)
KEYS = {
    "x[1]": 1, "x[-1]": -1, "x[1:]": slice(1, None), "x[::2]": slice(None, None, 2),
    "x[::-1]": slice(None, None, -1), "x[-2:, 1:3]": (slice(-2, None), slice(1, 3)),
    "x[0, -1, 2]": (0, -1, 2), "x[..., 1]": (Ellipsis, 1), "x[None]": None,
    "x[:, None, 1:4:2]": (slice(None), None, slice(1, 4, 2)),
    "x[1, ..., None, ::3]": (1, Ellipsis, None, slice(None, None, 3)),
    "x[[2, 0, 2]]": [2, 0, 2], "x[:, [3, -1]]": (slice(None), [3, -1]),
    "x[1, [0, 3]]": (1, [0, 3]), "x[np.array([[0, 1], [2, 2]])]": np.array([[0, 1], [2, 2]]),
    "x[:, :, [4, 0]]": (slice(None), slice(None), [4, 0]),
    "x[mask]": np.array([True, False, True]),
    "x[mask2d]": A[:, :, 0] % 3 == 0,
}


@pytest.mark.parametrize("name", KEYS)
def test_indexing_like_numpy(name):
    key = KEYS[name]
    out = V(A)[key]
    np.testing.assert_array_equal(value(out), A[key])
    assert out.shape == A[key].shape
    check_function_grad(lambda v: v[key], A)


def test_index_variables_gather_and_bool_variable_masks_work_eagerly():
    index = V(np.array([2, 0]))
    np.testing.assert_array_equal(value(V(A)[index]), A[[2, 0]])
    np.testing.assert_array_equal(value(V(A)[:, index]), A[:, [2, 0]])
    np.testing.assert_array_equal(value(V(A)[V(np.int64(1))]), A[1])
    check_function_grad(lambda v, i: v[i], A, np.array([[2, 2], [0, 1]]))
    x = V(A)
    np.testing.assert_array_equal(value(x[x > 30]), A[A > 30])


def test_bool_variable_mask_refused_while_tracing_with_a_clear_error():
    def f(x):
        return x[x > 0.5]
    with pytest.raises(tape.InvalidArgumentError, match="shape known only from the mask"):
        tape.static.trace(f, np.ones((2, 3), np.float32))


@pytest.mark.parametrize("key, message", [
    ((0, 0, 0, 0), "too many indices"), (5, "out of bounds"), ((slice(None), [9]), "out of bounds"),
    ((Ellipsis, Ellipsis), "more than one Ellipsis"), ("a", "unsupported index"),
    ((np.array([True, False]),), "does not match"), ((0, np.array([True] * 4)), "only index"),
    (([0, 1], slice(None), 0), "two steps"),
])
def test_bad_indices_raise_index_error(key, message):
    with pytest.raises(IndexError, match=message):
        V(A)[key]


def test_traced_program_indexes_and_exports_ops():
    program = tape.static.trace(lambda x: x[:, 1:, ::2].sum(axis=-1) * 2.0, A[:1])
    (out,) = tape.static.Executor().run(program, feed={program.feed_names[0]: A},
                                        fetch_list=program.fetch_names)
    np.testing.assert_allclose(out, A[:, 1:, ::2].sum(-1) * 2.0)


# ---- repr ----

def test_repr_shows_values_and_only_the_description_while_tracing():
    text = repr(V(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), name="w"))
    assert text.startswith("Variable(w, shape=[2, 2], dtype=float32, stop_gradient=True,")
    assert "[[1., 2.],\n" in text and text.endswith("[3., 4.]])")
    seen = []
    tape.static.trace(lambda x: seen.append(repr(x)) or x * 2.0, np.ones(3, np.float32))
    assert seen[0].endswith(", stop_gradient=True)")


# ---- raw ops: a single int for INTS, and real signatures ----

def test_ints_attribute_takes_a_single_int():
    np.testing.assert_array_equal(value(ops.reduce_sum(V(X), dim=0)), X.sum(0))
    np.testing.assert_array_equal(value(ops.unsqueeze2(V(X), axes=1)), X[:, None])


def test_op_functions_have_signatures_with_slots_and_attribute_defaults():
    sig = inspect.signature(ops.reduce_sum)
    assert str(sig) == "(X, *, dim=(0,), keep_dim=False, reduce_all=False, in_dtype=-1, " \
                       "out_dtype=-1)"
    params = inspect.signature(ops.slice).parameters
    assert params["StartsTensor"].default is None and params["axes"].default is params[
        "axes"].empty
    assert "(X, Y, *, axis=-1)" in _help_text(ops.elementwise_add)


def _help_text(fn) -> str:
    import pydoc
    return pydoc.render_doc(fn, renderer=pydoc.plaintext)
