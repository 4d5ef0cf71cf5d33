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
so the arithmetic is the unfused kernels' element for element.

Loops are made once per (program, dtype) and kept for the process, and compiled once per
machine: numba caches on disk only functions defined in a real source file, so each loop's
source is written, once, to a file named by a hash of that source in ``cache_directory()``, and
compiled with ``cache=True`` (``jit._compile``: the stamps of ``formulas.py`` and ``jit.py``
join numba's index). numba's own index then keys the compiled code by the file's content, the
numba version, the CPU name and features and the signature (the dtype); a later process loads
it instead of compiling. The file is never imported: the loop is made from the source generated
here, and a file whose content is not that source is written again before numba reads it.
"""
import hashlib
import os
import types
import warnings

import numpy as np

from . import formulas, jit  # noqa: F401 (formulas: the generated loops' global)

_loops: dict = {}
compilations = 0    # loops this process compiled with numba (tests check reuse)
cache_loads = 0     # loops this process loaded from numba's disk cache instead
# numpy's error model: x / 0 is inf or nan, as numpy's divide gives, not an exception
_OPTIONS = {"error_model": "numpy"}
_NO_DIRECTORY = object()
_directory = None   # cache_directory()'s answer, found on first use


def run_group(program: tuple, dtype, inputs: list, outputs: list, scalars) -> None:
    """Run ``program`` over the flat arrays ``inputs`` into the flat arrays ``outputs`` (all of
    one size); ``scalars`` (an array of the dtype) holds all steps' scalar arguments in step
    order."""
    key = (program, dtype)
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = _compile(program, dtype, len(inputs))
    loop(*inputs, *outputs, scalars)


def cache_directory():
    """Where the loops' source files go, and (without ``NUMBA_CACHE_DIR``) numba's cache of
    them, in its ``__pycache__``: the first writable of ``TAPE_FUSED_CACHE_DIR``,
    ``$NUMBA_CACHE_DIR/tape_fused``, ``kernels/__pycache__/tape_fused`` beside numba's cache of
    the other kernels, and ``$XDG_CACHE_HOME/tape/fused`` (``~/.cache/tape/fused``) — numba's
    own order of places. None when none is writable (loops are then compiled in memory)."""
    global _directory
    if _directory is None:
        _directory = next(filter(_writable, _candidates()), _NO_DIRECTORY)
    return None if _directory is _NO_DIRECTORY else _directory


def _candidates():
    chosen = os.environ.get("TAPE_FUSED_CACHE_DIR")
    if chosen:
        yield chosen
    numba_cache = os.environ.get("NUMBA_CACHE_DIR")
    if numba_cache:
        yield os.path.join(numba_cache, "tape_fused")
    yield os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__", "tape_fused")
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    yield os.path.join(user_cache, "tape", "fused")


def _writable(directory: str) -> bool:
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK | os.X_OK)


def _compile(program: tuple, dtype, inputs: int):
    global compilations, cache_loads
    import numba
    jit._register_formulas()
    name, source = _source(program, dtype, inputs)
    path = _written(name, source)
    # a function of this module's globals (np, formulas): numba rebuilds a cached loop's
    # environment by importing the module its globals name
    code = compile(source, path or f"<fused group {name}>", "exec")
    body = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    function = types.FunctionType(body, globals(), name)
    signature = _signature(numba, dtype, inputs, len(program[1]))
    if path is None:
        loop = numba.njit(**_OPTIONS)(function)
        _compile_signature(numba, loop, signature)
    else:
        loop = jit._compile(function, _OPTIONS)
        try:
            _compile_signature(numba, loop, signature)
        except Exception as error:
            if sum(loop.stats.cache_misses.values()):
                raise   # (numba found no cache entry and compiled: the error is the compiler's)
            # a cache entry that does not load (truncated, written by something else): numba
            # reads its index and data files without a check of its own
            warnings.warn(f"tape: the cached fused loop {name} in {loop.stats.cache_path} "
                          f"did not load ({type(error).__name__}: {error}); compiling it again",
                          stacklevel=2)
            loop._cache.flush()     # an empty index: the entry is written anew
            loop = jit._compile(function, _OPTIONS)
            _compile_signature(numba, loop, signature)
    if sum(loop.stats.cache_hits.values()):
        cache_loads += 1
    else:
        compilations += 1
    return loop


def _compile_signature(numba, loop, signature) -> None:
    with warnings.catch_warnings():
        # numba's own "pedantic" SSA check objects to the names it gives inlined formulas
        # with a branch (relu) in a long loop body; the compiled code is right (the tests
        # compare every step with the unfused kernels bit for bit)
        warnings.simplefilter("ignore", numba.NumbaIRAssumptionWarning)
        loop.compile(signature)


def _source(program: tuple, dtype, inputs: int):
    """``(name, source)``: the loop's function, named by a hash of everything that makes its
    code (the steps, the dtype, the numba options)."""
    steps, outputs = program
    cast = f"np.{np.dtype(dtype).name}"
    ins = [f"in{k}" for k in range(inputs)]
    outs = [f"out{k}" for k in range(len(outputs))]
    lines = [f"def NAME({', '.join(ins + outs)}, scalars):",
             f"    for i in range({outs[0]}.size):"]
    lines += [f"        a{k} = in{k}[i]" for k in range(inputs)]
    next_scalar = 0
    for n, (formula, operands, count, literals) in enumerate(steps):
        args = [_operand(o) for o in operands]
        args += [f"scalars[{k}]" for k in range(next_scalar, next_scalar + count)]
        args += [repr(literal) for literal in literals]
        next_scalar += count
        lines.append(f"        v{n} = {cast}(formulas.{formula}({', '.join(args)}))")
    lines += [f"        out{k}[i] = {_operand(o)}" for k, o in enumerate(outputs)]
    header = ["# A fused loop of kernels/fused.py, compiled there with that module's globals",
              f"# (np, formulas) and numba options {_OPTIONS!r}; never imported.", ""]
    text = "\n".join(header + lines) + "\n"
    name = "fused_" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return name, text.replace("def NAME(", f"def {name}(", 1)


def _operand(o) -> str:
    return f"a{o[1]}" if o[0] == "in" else f"v{o[1]}"


def _written(name: str, source: str):
    """The path of the file holding ``source`` in the cache directory (written atomically if it
    is missing or holds anything else), or None where no directory is writable."""
    directory = cache_directory()
    if directory is None:
        return None
    path = os.path.join(directory, name + ".py")
    data = source.encode()
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return path
    except OSError:
        pass
    from tape.atomic import atomic_write
    try:
        atomic_write(path, data)
    except OSError as error:
        warnings.warn(f"tape: could not write the fused loop {path} ({error}); it is compiled "
                      f"for this process only", stacklevel=2)
        return None
    return path


def _signature(numba, dtype, inputs: int, outputs: int):
    """The loop's one signature: 1-d contiguous arrays of the dtype, and the scalars."""
    array = numba.from_dtype(np.dtype(dtype))[::1]
    return (*[array] * (inputs + outputs), array)
