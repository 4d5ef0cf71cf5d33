"""One numba loop per group of elementwise steps (lazy execution's fusion, ``tape.fusion``).

A group is described by its *program*: ``(steps, outputs)``. Each step applies a formula of
``kernels/formulas.py`` to operands — ``("in", k)``, element ``i`` of the group's flat input
``k``, or ``("v", k)``, the value of step ``k`` — followed by a number of scalar arguments
(attribute values, read in order from one array of the group's dtype: a numba call types each
argument, and a group may have hundreds) and literal arguments written into the loop (a mode
that picks the arithmetic). ``outputs`` names the operand each flat output array stores, so a
group may be a DAG with several results (a grad op's dX and dY, forward values that backward
reads). The loop computes every step of element ``i`` in registers and stores only the outputs:
each step's value is rounded to the array dtype, as storing it to an intermediate array would,
so the arithmetic is the unfused kernels' element for element. Loops are compiled once per
(program, dtype) and kept for the process (numba caches no function made from generated source
on disk).
"""
import warnings

import numpy as np

from . import formulas
from .jit import _register_formulas

_loops: dict = {}
compilations = 0    # how many loops this process compiled (tests check reuse)


def run_group(program: tuple, dtype, inputs: list, outputs: list, scalars) -> None:
    """Run ``program`` over the flat arrays ``inputs`` into the flat arrays ``outputs`` (all of
    one size); ``scalars`` (an array of the dtype) holds all steps' scalar arguments in step
    order."""
    key = (program, dtype)
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = _compile(program, dtype, len(inputs))
    loop(*inputs, *outputs, scalars)


def _operand(o) -> str:
    return f"a{o[1]}" if o[0] == "in" else f"v{o[1]}"


def _compile(program: tuple, dtype, inputs: int):
    global compilations
    import numba
    _register_formulas()
    steps, outputs = program
    ins = [f"in{k}" for k in range(inputs)]
    outs = [f"out{k}" for k in range(len(outputs))]
    lines = [f"def fused_group({', '.join(ins + outs)}, scalars):",
             f"    for i in range({outs[0]}.size):"]
    lines += [f"        a{k} = in{k}[i]" for k in range(inputs)]
    next_scalar = 0
    for n, (formula, operands, count, literals) in enumerate(steps):
        args = [_operand(o) for o in operands]
        args += [f"scalars[{k}]" for k in range(next_scalar, next_scalar + count)]
        args += [repr(literal) for literal in literals]
        next_scalar += count
        lines.append(f"        v{n} = cast(formulas.{formula}({', '.join(args)}))")
    lines += [f"        out{k}[i] = {_operand(o)}" for k, o in enumerate(outputs)]
    namespace = {"formulas": formulas, "cast": np.dtype(dtype).type}
    exec(compile("\n".join(lines), f"<fused group of {len(steps)} steps>", "exec"), namespace)
    compilations += 1
    # numpy's error model: x / 0 is inf or nan, as numpy's divide gives, not an exception
    loop = numba.njit(error_model="numpy")(namespace["fused_group"])
    with warnings.catch_warnings():
        # numba's own "pedantic" SSA check objects to the names it gives inlined formulas
        # with a branch (relu) in a long loop body; the compiled code is right (the tests
        # compare every step with the unfused kernels bit for bit)
        warnings.simplefilter("ignore", numba.NumbaIRAssumptionWarning)
        loop.compile(_signature(numba, dtype, inputs, len(outputs)))
    return loop


def _signature(numba, dtype, inputs: int, outputs: int):
    """The loop's one signature: 1-d contiguous arrays of the dtype, and the scalars."""
    array = numba.from_dtype(np.dtype(dtype))[::1]
    return (*[array] * (inputs + outputs), array)
