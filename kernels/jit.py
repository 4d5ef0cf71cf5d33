"""``njit``: numba's ``@njit(cache=True)``, deferred until the first call; ``pointwise``: such a
loop over flat arrays around a formula of ``kernels/formulas.py``.

``import tape`` must neither import numba (about half a second) nor compile anything, so a
kernel module decorates its loops with this; numba is imported and the function compiled (or
loaded from the on-disk cache) the first time it runs.

CPU loops call the formulas by name (``formulas.relu_grad(out[i], dout[i])``): before the first
compilation every function of ``kernels/formulas.py`` is registered with numba, which then
compiles it into the loop that calls it. numba's cache checks only the file a function is
defined in, so the stamps of the formulas file and of this one are added to every cached loop's:
editing a formula recompiles the loops instead of loading stale ones.

Where ``python -m tape.optim.compile_kernels`` built ahead-of-time variants (``kernels/aot.py``),
a call whose argument types match one exactly runs it without importing numba; any other call runs
numba's.
"""
import inspect
import os
import weakref

from . import aot, formulas

# every njit alive: what the ahead-of-time build looks through
instances = weakref.WeakSet()


class njit:
    """Decorator: a function compiled by numba on first call, cached on disk."""

    __slots__ = ("py_func", "key", "_compiled", "_options", "_aot", "__weakref__")

    def __init__(self, fn=None, *, key=None, **options):
        self.py_func = fn
        self.key = key or f"{fn.__module__}.{fn.__qualname__}"
        self._compiled = None
        self._options = options
        self._aot = None
        instances.add(self)

    def __call__(self, *args):
        variants = self._aot
        if variants is None:
            variants = self._aot = aot.variants(self.key)
        if variants:
            exact = variants.get(aot.signature(args))
            if exact is not None:
                return exact(*args)
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compile(self.py_func, self._options)
            if _recorder is not None:
                compiled = self._compiled = _recorder(self, compiled)
        return compiled(*args)


def njit_with(**options):
    """``@njit_with(parallel=True)``: the same, with numba options."""
    return lambda fn: njit(fn, **options)


def pointwise(formula, inputs=2):
    """A lazily compiled loop ``loop(*arrays, out, scalars)`` setting ``out[i] =
    formula(*(a[i] for a in arrays), *scalars)`` over ``inputs`` flat arrays; ``scalars`` is a
    tuple of the formula's remaining arguments (attributes)."""
    _called_with_star_args.add(formula)
    key = f"{__name__}.pointwise({formula.__module__}.{formula.__name__}, inputs={inputs})"
    if inputs == 1:
        def unary(a, out, scalars):
            for i in range(out.size):
                out[i] = formula(a[i], *scalars)
        return njit(unary, key=key)

    def binary(a, b, out, scalars):
        for i in range(out.size):
            out[i] = formula(a[i], b[i], *scalars)
    return njit(binary, key=key)


_registered = False
_called_with_star_args = set()
# set by the ahead-of-time build: ``_recorder(njit, dispatcher)`` wraps each compiled function
_recorder = None


def _register_formulas():
    """Let numba compile every function of ``formulas`` where a jitted function calls it."""
    global _registered
    if _registered:
        return
    from numba.extending import register_jitable
    for value in vars(formulas).values():
        if not inspect.isfunction(value) or value.__module__ != formulas.__name__:
            continue
        if value in _called_with_star_args:
            # numba inlines no call with *args; LLVM inlines these small bodies anyway. numpy's
            # error model (no zero-division check per element, as on CUDA) keeps them from
            # blocking vectorisation.
            register_jitable(error_model="numpy")(value)
        else:
            # inlined into the caller's code before typing: the caller's options hold, and the
            # window loops know their indices are not negative (pooling 30% faster than a call)
            register_jitable(inline="always")(value)
    _registered = True


def _compile(fn, options):
    import numba
    _register_formulas()
    dispatcher = numba.njit(cache=True, **options)(fn)
    # numba's cache index keeps the stamp (mtime, size) of the function's own file and drops
    # its entries when the stamp differs; the formulas and this file (how they compile) join
    # it. numba has no public hook for this: tests/test_kernel_formulas.py checks it holds.
    index = dispatcher._cache._cache_file
    index._source_stamp = (index._source_stamp, *map(_stamp, (formulas.__file__, __file__)))
    return dispatcher


def _stamp(path):
    stat = os.stat(path)
    return stat.st_mtime, stat.st_size
