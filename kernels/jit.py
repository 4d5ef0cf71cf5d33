"""``njit``: numba's ``@njit(cache=True)``, deferred until the first call.

``import tape`` must neither import numba (about half a second) nor compile anything, so a
kernel module decorates its loops with this; numba is imported and the function compiled (or
loaded from the on-disk cache) the first time it runs.
"""


class njit:
    """Decorator: a function compiled by numba on first call, cached on disk."""

    __slots__ = ("py_func", "_compiled", "_options")

    def __init__(self, fn=None, **options):
        self.py_func = fn
        self._compiled = None
        self._options = options

    def __call__(self, *args):
        compiled = self._compiled
        if compiled is None:
            import numba
            compiled = self._compiled = numba.njit(cache=True, **self._options)(self.py_func)
        return compiled(*args)


def njit_with(**options):
    """``@njit_with(parallel=True)``: the same, with numba options."""
    return lambda fn: njit(fn, **options)
