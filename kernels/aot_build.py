"""Building the ahead-of-time kernels of ``kernels/aot.py`` from a workload's kernel calls.

Each signature is compiled with the flags numba's JIT compiled it with (the dispatcher's own
options: fastmath, error model and the rest) and for the same CPU features as the JIT's; every
variant is then run on the arguments recorded for it and must give the JIT's result bit for bit
(every argument array after the call, and the return value), else it is left out. The module and
its manifest go into place only after all of that (the manifest last, by an atomic rename): an
interrupted or failed build leaves nothing a later process would load.
"""
from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

from . import aot, jit


class Recorder:
    """Wraps each kernel compiled while it is installed; keeps a copy of the arguments of the
    first call of every signature, taken before the call."""

    def __init__(self):
        self.calls = {}         # kernel key -> {signature: copied arguments}
        self.dispatchers = {}   # kernel key -> numba dispatcher

    def __call__(self, kernel, dispatcher):
        calls = self.calls.setdefault(kernel.key, {})
        self.dispatchers[kernel.key] = dispatcher

        def recorded(*args):
            described = aot.signature(args)
            if described not in calls:
                calls[described] = _copy(args)
            return dispatcher(*args)
        return recorded

    @contextlib.contextmanager
    def installed(self):
        """Kernels compiled inside the block are recorded; every kernel starts uncompiled (numba
        loads it from its cache again) and sees no ahead-of-time variants."""
        saved = jit._recorder, aot._table
        jit._recorder, aot._table = self, {}
        _forget_compiled()
        try:
            yield self
        finally:
            jit._recorder, aot._table = saved
            _forget_compiled()


def _forget_compiled():
    for kernel in list(jit.instances):
        kernel._compiled = kernel._aot = None


def _copy(value):
    """A copy with the same numba type (layout, writeability); None where there is none."""
    if isinstance(value, tuple):
        items = tuple(map(_copy, value))
        return None if any(i is None and v is not None for i, v in zip(items, value)) else items
    if type(value) is not np.ndarray:
        return value
    if not (value.flags.c_contiguous or value.flags.f_contiguous):
        return None
    copy = value.copy(order="K")
    copy.flags.writeable = value.flags.writeable
    return copy if aot.signature((copy,)) == aot.signature((value,)) else None


def build(workload, directory: str = aot.DIRECTORY, log=print) -> str | None:
    """Run ``workload()`` recording kernel calls, compile and check their signatures, install the
    module for the current sources in ``directory``; return its manifest's path (None if no
    signature could be compiled)."""
    with Recorder().installed() as recorder:
        workload()
    exports = _exports(recorder, log)
    if not exports:
        log("aot: no kernel signature to compile")
        return None
    key = aot.source_key()
    manifest_path = aot.manifest_path(directory, key)
    # a new name for every build: a manifest only ever names the module built with it
    name = f"{aot.PREFIX}{key}_{os.urandom(6).hex()}"
    module_path = os.path.join(directory, name + ".so")
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=directory) as scratch:
        start = time.perf_counter()
        built = _compile(name, exports, scratch)
        log(f"aot: compiled {len(exports)} signatures of {len({e['kernel'] for e in exports})} "
            f"kernels in {time.perf_counter() - start:.1f} s")
        module = aot.load_module(name, built)
        checked = [e for e in exports if _same_bits(e, module, log)]
        if not checked:
            return None
        manifest = {"module": name, "file": os.path.basename(module_path), "key": key,
                    "variants": [{"kernel": e["kernel"], "symbol": e["symbol"],
                                  "signature": e["signature"]}
                                 for e in checked]}
        os.replace(built, module_path)
        from tape.atomic import atomic_open
        with atomic_open(manifest_path) as f:
            f.write(json.dumps(manifest, indent=1).encode())
    _remove_stale(directory, (manifest_path, module_path))
    log(f"aot: {len(checked)} variants in {module_path}")
    return manifest_path


def _exports(recorder, log) -> list:
    """The recorded signatures pycc can compile as the JIT did, each with its export symbol."""
    from numba.core.typing.typeof import typeof
    exports = []
    sharing = collections.Counter(kernel.key for kernel in list(jit.instances))
    for key, calls in sorted(recorder.calls.items()):
        dispatcher = recorder.dispatchers[key]
        if sharing[key] != 1:
            log(f"aot: skipped {key}: {sharing[key]} kernels share this key")
            continue
        if dispatcher.targetoptions.get("parallel"):
            log(f"aot: skipped {key}: parallel=True is not compiled ahead of time")
            continue
        for described, args in calls.items():
            if args is None or None in described:
                continue
            types = tuple(typeof(a) for a in args)
            manifest_types = [aot.describe_type(t) for t in types]
            if types not in dispatcher.overloads or None in manifest_types or \
                    described not in aot.keys_of_all(manifest_types):
                log(f"aot: skipped {key}{types}: not a signature the JIT compiled as such")
                continue
            exports.append({"kernel": key, "signature": manifest_types, "args": args,
                            "symbol": f"k{len(exports)}", "dispatcher": dispatcher,
                            "types": dispatcher.overloads[types].signature})
    return exports


def _compile(name: str, exports: list, directory: str) -> str:
    from numba.pycc import CC
    cc = CC(name)
    cc.output_dir = directory
    cc.target_cpu = "host"
    for export in exports:
        cc.export(export["symbol"], export["types"])(export["dispatcher"].py_func)
    with _as_the_jit_compiles({id(e["dispatcher"].py_func): e["dispatcher"] for e in exports}):
        cc.compile()
    return os.path.join(directory, cc.output_file)


@contextlib.contextmanager
def _as_the_jit_compiles(dispatchers: dict):
    """Inside the block pycc compiles each function with the flags its JIT dispatcher uses
    (pycc's own are numba's defaults: no fastmath, no error model), for the host's CPU features
    as the JIT does (pycc's ``host`` names the CPU model only), calling the C library's math
    functions the JIT calls."""
    from numba.core import codegen, compiler
    from numba.pycc import compiler as pycc_compiler

    original_compile = pycc_compiler.compile_extra
    original_features = codegen.AOTCPUCodegen._customize_tm_features

    pinned = set()

    def compile_extra(typingctx, targetctx, func, args, return_type, flags, locals, **kwargs):
        library = kwargs.get("library")
        if library is not None and id(library) not in pinned:
            pinned.add(id(library))
            library.add_llvm_module(_math_versions_module())
        dispatcher = dispatchers[id(func)]
        jit_flags = dispatcher.targetdescr.options.parse_as_flags(compiler.Flags(),
                                                                 dispatcher.targetoptions)
        jit_flags.no_compile = flags.no_compile
        jit_flags.nrt = flags.nrt
        return original_compile(typingctx, targetctx, func, args, return_type, jit_flags,
                                locals, **kwargs)

    pycc_compiler.compile_extra = compile_extra
    codegen.AOTCPUCodegen._customize_tm_features = codegen.CPUCodegen._get_host_cpu_features
    try:
        yield
    finally:
        pycc_compiler.compile_extra = original_compile
        codegen.AOTCPUCodegen._customize_tm_features = original_features


def _math_versions_module():
    """An LLVM module whose ``.symver`` lines bind the math functions to the versions numba's
    JIT calls. The JIT calls them through numba's ``_helperlib``, linked against old glibc
    versions (``log@GLIBC_2.2.5``); a module linked now would get the newest (``log@GLIBC_2.29``,
    whose ``log(-1)`` is NaN with the other sign bit)."""
    from llvmlite import binding
    from numba.core import intrinsics
    lines = [f'module asm ".symver {name},{name}@{version}"'
             for name, version in sorted(_helperlib_versions().items())
             if name in intrinsics.INTR_MATH]
    binding.initialize_native_asmparser()   # module asm is assembled with the code
    return binding.parse_assembly("\n".join(lines) + "\n")


def _helperlib_versions() -> dict:
    """``{symbol: version}`` of what numba's ``_helperlib`` imports from the C library (read
    with objdump; empty where there is none: the bit check then judges each variant alone)."""
    from numba import _helperlib
    objdump = shutil.which("objdump")
    if objdump is None:
        return {}
    listing = subprocess.run([objdump, "-T", _helperlib.__file__], capture_output=True,
                             text=True, check=False).stdout
    versions = {}
    for line in listing.splitlines():
        fields = line.split()
        if "*UND*" in fields and len(fields) >= 2 and fields[-2].startswith("(GLIBC_"):
            versions[fields[-1]] = fields[-2].strip("()")
    return versions


def _same_bits(export, module, log) -> bool:
    """Whether the compiled variant gives the JIT's results bit for bit on the recorded call and
    on calls of the same shapes whose floating-point arrays hold other (random) values."""
    for seed in (None, *range(RANDOM_CALLS)):
        results = []
        for function in (export["dispatcher"], getattr(module, export["symbol"])):
            args = _copy(export["args"]) if seed is None else _randomised(export["args"], seed)
            try:
                returned = function(*args)
            except Exception as e:  # noqa: BLE001 - the same error from both is the same result
                returned = f"{type(e).__name__}: {e}"
            results.append(_bits((args, returned)))
        if results[0] != results[1]:
            log(f"aot: left out {export['kernel']}{export['types']}: differs from the JIT")
            return False
    return True


# Calls with random values besides the recorded one: different data through the same paths
# (integer arrays, often indices, and scalars stay as recorded).
RANDOM_CALLS = 3


def _randomised(args, seed: int):
    rng = np.random.default_rng(seed)

    def fill(value):
        if isinstance(value, tuple):
            return tuple(map(fill, value))
        if type(value) is not np.ndarray or value.dtype.kind not in "fc":
            return _copy(value)
        copy = _copy(value)
        writeable = copy.flags.writeable
        copy.flags.writeable = True
        copy[...] = rng.standard_normal(copy.shape)
        copy.flags.writeable = writeable
        return copy
    return tuple(map(fill, args))


def _bits(value):
    if isinstance(value, (tuple, list)):
        return tuple(map(_bits, value))
    if value is None:
        return None
    array = np.asarray(value)
    return type(value).__name__, array.dtype.str, array.shape, array.tobytes()


def _remove_stale(directory: str, keep: tuple):
    """Modules and manifests of other builds: never loaded again."""
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        if entry.startswith(aot.PREFIX) and path not in keep:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
