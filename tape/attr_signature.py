"""The signature of an op's attributes: what tells apart two calls whose attributes differ.

Names, values and the values' types (``1``, ``1.0`` and ``True`` are equal as dict keys, but not
the same attribute value). Equality alone misses two float values: ``-0.0 == 0.0`` (yet
``x * -0.0`` and ``x * 0.0`` differ in sign) and ``nan != nan`` (a fresh NaN would miss every
cache). A signature whose attributes hold a zero or a NaN is therefore the exact one: each NaN
replaced by one shared NaN (equal to itself by identity; NaNs count as one value), lists as
tuples, and one more entry, the zeros' signs in order, which also makes it longer than the
plain signature of the same attributes, so that the two never meet in one cache.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

_FLOATS = (float, np.floating)
_NAN = float("nan")


class ZeroSigns(tuple):
    """The last entry of an exact signature: whether each zero among the values is -0.0."""

    __slots__ = ()


def signature(attrs: dict) -> tuple:
    """The signature of ``attrs``: plain (``(*attrs.items(), *types)``) unless a float value,
    or one in a list or tuple, is a zero or a NaN; then the exact one (see the module)."""
    if not attrs:
        return ()
    signs = []
    if not _special(attrs.values(), signs):
        return (*attrs.items(), *map(type, attrs.values()))
    return (*((name, _exact(value)) for name, value in attrs.items()),
            *map(type, attrs.values()), ZeroSigns(signs))


def listed_signature(attrs: dict) -> tuple:
    """The plain signature of ``attrs`` (which hold no float zero or NaN), hashable when a
    value is a list of hashable items: each list as ``(its items as a tuple, their types)``,
    which tell calls apart as the list would (``[1, 2]`` and ``[1.0, 2.0]`` are two
    signatures). A list of lists stays unhashable."""
    if not attrs:
        return ()
    return (*((name, (tuple(value), tuple(map(type, value))) if type(value) is list else value)
              for name, value in attrs.items()), *map(type, attrs.values()))


def is_exact(sig) -> bool:
    """Whether ``sig`` is an exact signature (its attributes hold a zero or a NaN), or a
    token (``token``), which stands for one."""
    return type(sig) is int or bool(sig) and type(sig[-1]) is ZeroSigns


_tokens = itertools.count(1)


def token() -> int:
    """A new signature token: an int that a caller which remembers a dict of attributes gives
    runners with it as its signature (``x * c``: ``tape.overloads``), one int to hash per call
    where a signature is a tuple to hash. Tokens are never reused, so no two sets of
    attributes share one; a caller that forgets its attributes makes a new token (and plans)
    for them when they come back."""
    return next(_tokens)


def _special(values, signs: list) -> bool:
    """Whether ``values`` hold a float zero or NaN (in lists and tuples too); appends each
    zero's sign to ``signs``."""
    found = False
    for v in values:
        if isinstance(v, _FLOATS):
            if v == 0:
                signs.append(math.copysign(1.0, v) < 0)
                found = True
            elif v != v:
                found = True
        elif isinstance(v, (list, tuple)):
            found = _special(v, signs) or found
    return found


def _exact(value):
    if isinstance(value, _FLOATS):
        return _NAN if value != value else value
    if isinstance(value, (list, tuple)):
        return tuple(map(_exact, value))
    return value
