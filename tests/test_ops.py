"""The generic op test: every registered op, collected from the registry, checked the same way.

For each op: it is covered (a grad op, or a forward op with a case, a numpy reference in
tests/references/ and kernels for its grad ops); over hypothesis-drawn cases, its forward matches
the reference in float64 and float32 and its gradient matches central differences; and
attribute values outside their declared domain, or of the wrong type, are rejected before any
kernel runs. Every op also runs lazily (``tape.LazyTape``), forward and backward, with values
equal to eager ones bit for bit. A newly registered op is picked up without touching this file.
"""
import importlib
import inspect
import pathlib
import pkgutil

import numpy as np
import pytest
import references
from hypothesis import given
from hypothesis import strategies as st

import tape
from tape import attribute, dtypes, ops
from tape.ops.control_flow import EXECUTOR_OPS
from tape.place import CPU
from tape.registry import REGISTRY, op_info
from tape.tape import using_tape
from tape.testing import Draw, check_forward, check_grad, grad_op_types, run_op, visible_values


def _load_references():
    """``{name: (function, module)}`` over every module of tests/references; a name defined in
    two modules maps to None (ambiguous)."""
    found = {}
    for module_info in pkgutil.iter_modules(references.__path__):
        module = importlib.import_module(f"references.{module_info.name}")
        for name, fn in vars(module).items():
            own = inspect.isfunction(fn) and fn.__module__ == module.__name__
            if name.startswith("_") or not own:
                continue
            found[name] = None if name in found else (fn, module.__name__)
    return found


REFERENCES = _load_references()


def _grad_types(info):
    try:
        return grad_op_types(info.type, *(info.case(Draw.from_seed(0)) if info.case else ()))
    except Exception:   # a broken case or grad maker fails the op's own tests, not collection
        return []


GRAD_OPS = {g: t for t, info in REGISTRY.items() if info.grad is not None
            for g in _grad_types(info)}
ALL_OPS = sorted(REGISTRY)
CASE_OPS = [t for t in ALL_OPS if REGISTRY[t].case is not None]


def _reference(op_type):
    """(reference, property check): one of them, or an AssertionError saying what is missing."""
    for name in (op_type, f"check_{op_type}"):
        if name in REFERENCES:
            if REFERENCES[name] is None:
                raise AssertionError(f"{op_type}: '{name}' is defined in more than one module "
                                     f"of tests/references")
            fn = REFERENCES[name][0]
            return (fn, None) if name == op_type else (None, fn)
    raise AssertionError(f"{op_type}: no numpy reference; define {op_type}(...) (or, for a "
                         f"random op, check_{op_type}(outputs, attrs)) in "
                         f"tests/references/<family>.py")


CONTROL_FLOW_TESTS = "".join(
    p.read_text() for p in (pathlib.Path(__file__).parent / "static").glob("test_control_flow*.py"))


@pytest.mark.parametrize("op_type", ALL_OPS)
def test_op_is_covered(op_type):
    info = op_info(op_type)
    if op_type in EXECUTOR_OPS:
        # run by the static Executor on the scope (sub-blocks, tensor arrays), never as one op:
        # it has a runner there, no kernel, and tests of its own in programs
        from tape.static.control_flow import RUNNERS
        assert op_type in RUNNERS and not info.kernels and info.case is None, op_type
        assert f'"{op_type}"' in CONTROL_FLOW_TESTS, (
            f"{op_type}: no test in tests/static/test_control_flow*.py names it")
        return
    if info.case is None:
        assert op_type in GRAD_OPS, (
            f"{op_type}: neither a grad op emitted by a forward op's grad maker nor a forward op "
            f"with a test case; pass case=fn to register_op")
        return
    _reference(op_type)
    for grad_type in grad_op_types(op_type, *info.case(Draw.from_seed(0))):
        assert grad_type in REGISTRY, f"{op_type}: its grad maker emits unregistered {grad_type}"
        for dtype in (dtypes.FP32, dtypes.FP64):
            REGISTRY[grad_type].kernel(CPU, dtype)   # raises NotFoundError naming what is missing


def _is_seeded(attrs):
    if "fix_seed" in attrs:
        return attrs["fix_seed"]
    return attrs.get("seed", 0) != 0


def _check_random_op(op_type, check, inputs, attrs):
    """Property check of a random op in float64 and float32, plus same seed -> same values."""
    info = op_info(op_type)
    full_attrs = info.check_attrs(attrs)
    takes_inputs = "inputs" in inspect.signature(check).parameters
    for dtype in (np.float64, np.float32):
        outputs = check_forward(op_type, inputs, attrs, None, dtype)
        extra = {"inputs": dict(inputs)} if takes_inputs else {}
        check(visible_values(op_type, outputs), full_attrs, **extra)
    if _is_seeded(full_attrs):
        first, second = run_op(op_type, inputs, attrs), run_op(op_type, inputs, attrs)
        for slot, vs in first.items():
            for a, b in zip(vs, second[slot]):
                assert np.array_equal(a.value(), b.value()), \
                    f"{op_type}: the same seed gave different values in output '{slot}'"


@pytest.mark.parametrize("op_type", CASE_OPS)
def test_op_matches_reference_and_gradient(op_type):
    reference, check = _reference(op_type)
    case = op_info(op_type).case

    @given(data=st.data())
    def matches(data):
        inputs, attrs = case(Draw.from_hypothesis(data))
        if reference is not None:
            check_forward(op_type, inputs, attrs, reference, np.float64)
            check_forward(op_type, inputs, attrs, reference, np.float32)
        else:
            _check_random_op(op_type, check, inputs, attrs)
        check_grad(op_type, inputs, attrs, seed=data.draw(st.integers(0, 2**16), label="seed"))

    matches()


_WRONG_TYPE = {attribute.INT: "1", attribute.LONG: "1", attribute.FLOAT: "0.5", attribute.STRING: 1,
               attribute.BOOLEAN: "true", attribute.INTS: ["1"], attribute.LONGS: ["1"],
               attribute.FLOATS: ["x"], attribute.STRINGS: [1], attribute.BOOLEANS: ["true"]}


def _attribute_cases(op_type):
    """(attribute, bad value, what the message must mention) for each check and each type."""
    cases = []
    for attr in op_info(op_type).attrs.values():
        if attr.check is not None:
            cases += [(attr.name, bad, attr.check.describe()) for bad in attr.check.invalid()]
        if attr.type in _WRONG_TYPE:
            cases.append((attr.name, _WRONG_TYPE[attr.type], None))
    return cases


@pytest.mark.parametrize("op_type", CASE_OPS)
def test_op_rejects_bad_attributes(op_type, forbid_kernels):
    inputs, attrs = op_info(op_type).case(Draw.from_seed(0))
    forbid_kernels(op_type)
    for name, bad, describe in _attribute_cases(op_type):
        with pytest.raises(tape.InvalidArgumentError) as error:
            run_op(op_type, inputs, {**attrs, name: bad})
        message = str(error.value)
        assert op_type in message and f"'{name}'" in message and repr(bad) in message, message
        assert describe is None or describe in message, message


def _run_recorded(op_type, inputs, attrs, recorder):
    """Run the op on ``recorder`` (a Tape or a LazyTape), then the backward of the sum of its
    gradient-carrying outputs times fixed cotangents: the outputs' arrays and the input
    gradients, read only after backward (so a lazy tape runs everything from there)."""
    info = op_info(op_type)
    wrt = set(info.grad.grads) if info.grad is not None else set()
    rng = np.random.default_rng(0)
    with using_tape(recorder):
        tape.seed(0)    # a random op draws the same numbers, whenever its kernel runs
        variables = {slot: [tape.Variable(np.array(a), stop_gradient=not (
                         slot in wrt and np.asarray(a).dtype.kind == "f"))
                            for a in (v if isinstance(v, (list, tuple)) else [v])]
                     for slot, v in inputs.items()}
        outputs = recorder.run(info, variables, attrs)
        terms = [ops.reduce_sum(v * tape.Variable(rng.standard_normal(v.shape).astype(v.dtype)),
                                reduce_all=True)
                 for vs in outputs.values() for v in vs if not v.stop_gradient]
        if terms:
            loss = terms[0]
            for term in terms[1:]:
                loss = loss + term
            loss.backward()
        values = {slot: [v.numpy() for v in vs] for slot, vs in outputs.items()}
        grads = {slot: [None if v.grad is None else v.grad.numpy() for v in vs]
                 for slot, vs in variables.items()}
    return values, grads


@pytest.mark.parametrize("op_type", CASE_OPS)
def test_op_runs_lazily_as_eagerly(op_type):
    for seed in (0, 1):
        inputs, attrs = op_info(op_type).case(Draw.from_seed(seed))
        eager = _run_recorded(op_type, inputs, attrs, tape.Tape())
        lazy = _run_recorded(op_type, inputs, attrs, tape.LazyTape())
        for kind, eager_arrays, lazy_arrays in zip(("output", "gradient of"), eager, lazy):
            for slot, arrays in eager_arrays.items():
                for a, b in zip(arrays, lazy_arrays[slot], strict=True):
                    assert (a is None) == (b is None), f"{op_type}: {kind} {slot}"
                    if a is not None:
                        np.testing.assert_array_equal(b, a, err_msg=f"{op_type}: lazy {kind} "
                                                      f"{slot} differs from eager")
