"""``check_function_grad``: ``tape.testing.check_grad``'s float64 central-difference check, for a
Python function of Variables (a composition of ops: a Variable method, an operator, a
functional) rather than one registered op."""
import numpy as np

from .. import ops
from ..tape import no_grad, reset_global_tape
from ..variable import Variable


def _run(fn, arrays, wrt=False):
    variables = [Variable(a, stop_gradient=not (wrt and a.dtype.kind == "f"))
                 for a in arrays]
    return variables, fn(*variables)


def _difference(fn, arrays, i, direction, cotangent, step) -> float:
    """``<cotangent, (fn(x + step v) - fn(x - step v)) / 2 step>`` with x the i-th input."""
    moved = [list(arrays), list(arrays)]
    moved[0][i], moved[1][i] = arrays[i] + step * direction, arrays[i] - step * direction
    with no_grad():
        plus, minus = (_run(fn, m)[1].value() for m in moved)
    return float(np.sum(cotangent * (plus - minus))) / (2 * step)


def check_function_grad(fn, *arrays, argnums=None, seed=0, rtol=1e-6, atol=1e-9):
    """The tape's vector-Jacobian product of ``fn`` (Variables -> one floating Variable) along a
    random direction equals float64 central differences, for each floating input (or those in
    ``argnums``); raises AssertionError naming the input and both values."""
    arrays = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
              for a in arrays]
    argnums = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if argnums is None \
        else argnums
    rng = np.random.default_rng(seed)
    reset_global_tape()
    variables, out = _run(fn, arrays, wrt=True)
    assert out.dtype == np.float64, f"{fn}: float64 inputs gave a {out.dtype} output"
    cotangent = rng.standard_normal(out.shape)
    ops.reduce_sum(out * Variable(cotangent), reduce_all=True).backward()
    for i in argnums:
        direction = rng.uniform(-1.0, 1.0, arrays[i].shape)
        grad = variables[i].grad
        assert grad is not None, f"{fn}: no gradient reached input {i}"
        analytic = float(np.sum(grad.value() * direction))
        h = 1e-6 * max(1.0, float(np.max(np.abs(arrays[i]))) if arrays[i].size else 1.0)

        numeric = _difference(fn, arrays, i, direction, cotangent, h)
        noise = abs(numeric - _difference(fn, arrays, i, direction, cotangent, 2 * h))
        scale = float(np.sum(np.abs(grad.value() * direction)))
        tolerance = atol + rtol * max(abs(analytic), abs(numeric), scale) + noise
        assert abs(analytic - numeric) <= tolerance, (
            f"{fn}: gradient of input {i} disagrees with finite differences: vector-Jacobian "
            f"product {analytic:.12g}, central difference {numeric:.12g} (tolerance "
            f"{tolerance:.3g})")
    reset_global_tape()
