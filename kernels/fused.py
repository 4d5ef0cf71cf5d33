"""One numba loop per chain of elementwise steps (lazy execution's fusion, ``tape.fusion``).

A chain is described by its *steps*: per step the formula of ``kernels/formulas.py`` it applies,
where its operands come from (``"v"``, the previous step's value, or an index into the chain's
flat input arrays), how many scalar arguments (attribute values, read in order from one array
of the chain's dtype: a numba call types each argument, and a chain may have hundreds) follow
them, and literal arguments written into the loop (a mode that picks the arithmetic). The loop
computes every step of element ``i`` in registers and stores only the last: each step's value
is rounded to the array dtype, as storing it to an intermediate array would, so the arithmetic
is the unfused kernels' element for element. Loops are compiled once per (steps, dtype) and
kept for the process (numba caches no function made from generated source on disk).
"""
import numpy as np

from . import formulas
from .jit import _register_formulas

_loops: dict = {}
compilations = 0    # how many loops this process compiled (tests check reuse)


def run_chain(steps: tuple, dtype, inputs: list, out, scalars: tuple) -> None:
    """Run the chain ``steps`` over the flat arrays ``inputs`` into the flat array ``out``;
    ``scalars`` (an array of the dtype) holds all steps' scalar arguments in step order."""
    key = (steps, dtype)
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = _compile(steps, dtype, len(inputs))
    loop(*inputs, out, scalars)


def _compile(steps: tuple, dtype, inputs: int):
    global compilations
    import numba
    _register_formulas()
    names = [f"in{k}" for k in range(inputs)]
    lines = [f"def fused_chain({', '.join(names)}, out, scalars):",
             "    for i in range(out.size):"]
    next_scalar = 0
    for formula, operands, count, literals in steps:
        args = ["v" if o == "v" else f"in{o}[i]" for o in operands]
        args += [f"scalars[{k}]" for k in range(next_scalar, next_scalar + count)]
        args += [repr(literal) for literal in literals]
        next_scalar += count
        lines.append(f"        v = cast(formulas.{formula}({', '.join(args)}))")
    lines.append("        out[i] = v")
    namespace = {"formulas": formulas, "cast": np.dtype(dtype).type}
    exec(compile("\n".join(lines), f"<fused chain {steps}>", "exec"), namespace)
    compilations += 1
    # numpy's error model: x / 0 is inf or nan, as numpy's divide gives, not an exception
    return numba.njit(error_model="numpy")(namespace["fused_chain"])
