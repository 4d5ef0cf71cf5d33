"""``FLAGS_*`` switches, read from the environment and settable with ``tape.set_flags``.

``FLAGS_enable_unused_var_check``: after each kernel, fail if the op declares an input the kernel
never read (see ``tape.checks``). ``FLAGS_check_nan_inf``: after each kernel, fail on the first
floating output holding a NaN or an Inf. ``FLAGS_lazy_execution``: ops record and compute
only when a value is asked for, as inside ``with tape.lazy():`` (``tape.lazy``).
``FLAGS_lazy_batching`` (on by default): a lazy execution runs ready ops of one signature as one
kernel call (``tape.batching``). ``FLAGS_lazy_fusion`` (on by default): it runs each group of
elementwise ops, forward and grad ops, on arrays of at least ``fusion_steps.MIN_ELEMENTS``
elements, as one numba loop that stores only what something else reads (``tape.fusion``).
"""
import os

_DEFAULTS = {
    "FLAGS_enable_unused_var_check": False,
    "FLAGS_check_nan_inf": False,
    "FLAGS_lazy_execution": False,
    "FLAGS_lazy_batching": True,
    "FLAGS_lazy_fusion": True,
}
_TRUE = {"1", "true", "on", "yes"}

flags = {name: os.environ.get(name, str(default)).lower() in _TRUE
         for name, default in _DEFAULTS.items()}

# Whether any per-kernel check is on: the one test the eager tape, backward and the Executor
# make per op before running a kernel.
checking = False


def _update_checking() -> None:
    global checking
    checking = flags["FLAGS_enable_unused_var_check"] or flags["FLAGS_check_nan_inf"]


def set_flags(values: dict) -> None:
    """Set flags by name, e.g. ``tape.set_flags({"FLAGS_check_nan_inf": True})``."""
    for name in values:
        if name not in flags:
            raise KeyError(f"unknown flag {name!r}; known: {sorted(flags)}")
    for name, value in values.items():
        flags[name] = bool(value)
    _update_checking()
    for name in values:
        for callback in _watchers.get(name, ()):
            callback()


_watchers: dict = {}


def on_change(name: str, callback) -> None:
    """Call ``callback()`` after ``set_flags`` sets flag ``name`` (the calling thread's
    tape follows FLAGS_lazy_execution this way)."""
    _watchers.setdefault(name, []).append(callback)


def get_flags(names=None) -> dict:
    """The current value of the named flags (all when ``names`` is None)."""
    if names is None:
        return dict(flags)
    if isinstance(names, str):
        names = [names]
    return {n: flags[n] for n in names}


_update_checking()
