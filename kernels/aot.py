"""Ahead-of-time compiled kernels: the first training step without importing numba.

Importing numba and loading its first cached function costs about a second, far more than a
small model's first step. ``aot_build.py`` runs a workload with every ``kernels.jit.njit``
function recording the argument types it is called with, compiles exactly those signatures with
``numba.pycc`` into one extension module for this machine's CPU, checks that every variant
gives the JIT's result bit for bit on the recorded arguments, and only then installs the
module (``python -m tape.optim.compile_kernels`` does all this). At run time ``variants`` hands
``njit`` the compiled functions of a kernel, keyed by ``signature``: a call whose arguments
match one exactly runs it; any other call goes to numba's JIT. A compiled function checks no
types (a wrong dtype crashes the process), so only an exact match may reach it.

The module's name carries a hash of every source file of ``kernels/`` and of the numba,
llvmlite, numpy and Python versions and the CPU: any change leaves the old module unused
(``python -m tape.optim.compile_kernels`` builds a new one). ``TAPE_AOT=0`` turns the modules off;
``TAPE_AOT_DIR`` puts them elsewhere than ``kernels/_aot``.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import sys

import numpy as np

# hashlib, json, platform and warnings are imported where used: only a kernel's first call
# reads the module, and ``import tape`` stays as short as it was

DIRECTORY = (os.environ.get("TAPE_AOT_DIR")
             or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_aot"))
PREFIX = "tape_aot_"
ENABLED = os.environ.get("TAPE_AOT", "1") != "0"

_table = None   # {kernel key: {signature: compiled function}}, read on first use


def variants(key: str) -> dict:
    """The ahead-of-time variants of the kernel ``key``: ``{signature: function}``, maybe empty."""
    global _table
    if _table is None:
        _table = _load(DIRECTORY) if ENABLED else {}
    return _table.get(key, {})


# ---- argument types, as numba's typeof sees them ----

_SCALARS = {float: "float64", bool: "bool", complex: "complex128",
            **{kind: np.dtype(kind).name for kind in (
                np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                np.uint64, np.float32, np.float64, np.complex64, np.complex128)}}
# numpy's NPY_ARRAY_C_CONTIGUOUS, _F_CONTIGUOUS, _ALIGNED and _WRITEABLE bits of ``flags.num``
C_CONTIGUOUS, F_CONTIGUOUS, ALIGNED, WRITEABLE = 0x1, 0x2, 0x100, 0x400
_ARRAY_BITS = C_CONTIGUOUS | F_CONTIGUOUS | ALIGNED | WRITEABLE
_ndarray = np.ndarray
_EMPTY_TUPLE = ("tuple",)


def signature(args) -> tuple:
    """A hashable key of what numba's typeof makes of each argument: an array's ``(dtype, ndim,
    its contiguity, alignment and writeability bits)``, a scalar's type name, a tuple's
    ``("tuple", *items)``; None for anything else (such a call matches no variant). On the path
    of every kernel call: one flags read per array (numba's own dispatch costs as much)."""
    key = []
    for value in args:
        if type(value) is _ndarray:
            key.append((value.dtype, value.ndim, value.flags.num & _ARRAY_BITS))
        else:
            key.append(_describe_other(value))
    return tuple(key)


def _describe_other(value):
    kind = type(value)
    if kind is int:     # numba: int64 below 2**63 in magnitude, uint64 up to 2**64
        bits = value.bit_length()
        return "int64" if bits < 64 else "uint64" if bits == 64 and value > 0 else None
    if kind is tuple:   # most often pointwise's empty tuple of attributes
        return ("tuple", *signature(value)) if value else _EMPTY_TUPLE
    return _SCALARS.get(kind)


def describe_type(numba_type):
    """A numba argument type as the manifest keeps it (JSON): an array's ``["array", dtype,
    ndim, layout, writeable, aligned]``, a scalar's name, a tuple's ``["tuple", *items]``; None
    if no ahead-of-time variant may take it."""
    from numba.core import types
    from numba.np import numpy_support
    if isinstance(numba_type, types.Array):
        if not isinstance(numba_type.dtype, (types.Boolean, types.Integer, types.Float,
                                             types.Complex)):
            return None
        return ["array", numpy_support.as_dtype(numba_type.dtype).str, numba_type.ndim,
                numba_type.layout, numba_type.mutable, numba_type.aligned]
    if isinstance(numba_type, types.BaseTuple):
        items = [describe_type(t) for t in numba_type.types]
        return None if None in items else ["tuple", *items]
    if isinstance(numba_type, (types.Boolean, types.Integer, types.Float, types.Complex)):
        return str(numba_type)
    return None


def keys_of(described) -> list:
    """Every ``signature`` key of arguments numba types as ``described`` (one argument)."""
    if isinstance(described, str):
        return [described]
    if described[0] == "tuple":
        return [("tuple", *items) for items in keys_of_all(described[1:])]
    _, dtype, ndim, layout, writeable, aligned = described
    rest = (ALIGNED if aligned else 0) | (WRITEABLE if writeable else 0)
    # numba's layout: "C" if C-contiguous (F too or not), else "F" if F-contiguous, else "A"
    contiguity = {"C": (C_CONTIGUOUS, C_CONTIGUOUS | F_CONTIGUOUS), "F": (F_CONTIGUOUS,),
                  "A": (0,)}[layout]
    return [(np.dtype(dtype), ndim, bits | rest) for bits in contiguity]


def keys_of_all(described_args) -> list:
    """Every ``signature`` key of a call whose arguments numba types as ``described_args``."""
    return [tuple(combination) for combination in
            itertools.product(*map(keys_of, described_args))]


# ---- which module fits these sources ----

def source_key(root: str = os.path.dirname(os.path.abspath(__file__))) -> str:
    """A hash of everything a compiled kernel depends on: the sources under ``root`` (this
    ``kernels/``), the numba, llvmlite, numpy and Python versions, the machine and its CPU."""
    import hashlib
    import platform
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in ("_aot", "__pycache__"))
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read() + b"\0")
    for package in ("numba", "llvmlite"):
        digest.update(_version_file(package) + b"\0")
    digest.update(f"{np.__version__}\0{sys.version}\0{platform.machine()}\0".encode())
    digest.update(_cpu_features())
    return digest.hexdigest()[:24]


def _version_file(package: str) -> bytes:
    """The package's ``_version.py`` (read, not imported: importing numba is what we avoid)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return b"absent"
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), "rb") as f:
            return f.read()
    except OSError:
        return os.path.dirname(spec.origin).encode()


def _cpu_features() -> bytes:
    """The CPU's model and flags (Linux); a module built for another CPU may not run here."""
    import platform
    try:
        with open("/proc/cpuinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return platform.processor().encode()
    wanted = (b"model name", b"flags", b"Features", b"CPU part")
    return b"\n".join(sorted({line for line in lines if line.startswith(wanted)}))


def manifest_path(directory: str, key: str) -> str:
    """Where the manifest of the module built for ``key`` is: it names the module's file."""
    return os.path.join(directory, f"{PREFIX}{key}.json")


def _load(directory: str) -> dict:
    import json
    import warnings
    try:
        with open(manifest_path(directory, source_key()), encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    try:
        manifest = json.loads(text)
        module = load_module(manifest["module"], os.path.join(directory, manifest["file"]))
        return table_of(manifest, module)
    except (ValueError, ImportError, KeyError, TypeError, AttributeError) as e:
        warnings.warn(f"tape: the ahead-of-time kernels in {directory} did not load "
                      f"({type(e).__name__}: {e}); numba's JIT runs every kernel. "
                      f"`python -m tape.optim.compile_kernels` rebuilds them.", RuntimeWarning,
                      stacklevel=3)
        return {}


def load_module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise ImportError(f"{path} is not an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_of(manifest: dict, module) -> dict:
    table = {}
    for entry in manifest["variants"]:
        function = getattr(module, entry["symbol"])
        for key in keys_of_all(entry["signature"]):
            table.setdefault(entry["kernel"], {})[key] = function
    return table
