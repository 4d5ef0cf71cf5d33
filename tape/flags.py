"""``FLAGS_*`` switches, read from the environment and settable with ``tape.set_flags``."""
import os

_DEFAULTS = {
    "FLAGS_enable_unused_var_check": False,
    "FLAGS_check_nan_inf": False,
}
_TRUE = {"1", "true", "on", "yes"}

flags = {name: os.environ.get(name, str(default)).lower() in _TRUE
         for name, default in _DEFAULTS.items()}


def set_flags(values: dict) -> None:
    """Set flags by name, e.g. ``tape.set_flags({"FLAGS_check_nan_inf": True})``."""
    for name, value in values.items():
        if name not in flags:
            raise KeyError(f"unknown flag {name!r}; known: {sorted(flags)}")
        flags[name] = bool(value)


def get_flags(names=None) -> dict:
    """The current value of the named flags (all when ``names`` is None)."""
    if names is None:
        return dict(flags)
    if isinstance(names, str):
        names = [names]
    return {n: flags[n] for n in names}
