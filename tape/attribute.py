"""Typed op attributes (framework.proto's AttrType) and the checks that bound their values."""
import numbers

from .errors import InvalidArgumentError

# framework.proto AttrType
INT, FLOAT, STRING, INTS, FLOATS, STRINGS, BOOLEAN, BOOLEANS, BLOCK, LONG, BLOCKS, LONGS = range(12)
ATTR_TYPE_NAMES = ("INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "BOOLEAN", "BOOLEANS",
                   "BLOCK", "LONG", "BLOCKS", "LONGS")
# Paddle 3.x's Scalar (a bool, an int or a float, each kept as it is) and lists of them
SCALAR, SCALARS = 16, 17
_TYPE_NAMES = {**dict(enumerate(ATTR_TYPE_NAMES)), SCALAR: "SCALAR", SCALARS: "SCALARS"}


# Value checks: each says what it wants and gives values it rejects (for the generic test).

class AtLeast:
    def __init__(self, low):
        self.low = low

    def __call__(self, v):
        return v >= self.low

    def describe(self):
        return f">= {self.low}"

    def invalid(self):
        return [self.low - 1]


class InRange:
    """Closed interval ``[low, high]``."""

    def __init__(self, low, high):
        self.low, self.high = low, high

    def __call__(self, v):
        return self.low <= v <= self.high

    def describe(self):
        return f"in [{self.low}, {self.high}]"

    def invalid(self):
        return [self.low - 1, self.high + 1]


class OneOf:
    def __init__(self, *values):
        self.values = values

    def __call__(self, v):
        return v in self.values

    def describe(self):
        return f"one of {list(self.values)}"

    def invalid(self):
        if all(isinstance(v, str) for v in self.values):
            return ["__not_an_option__"]
        return [max(self.values) + 1]


class Each:
    """Applies a check to every element of a list attribute."""

    def __init__(self, check):
        self.check = check

    def __call__(self, v):
        return all(self.check(x) for x in v)

    def describe(self):
        return f"every element {self.check.describe()}"

    def invalid(self):
        return [(x,) for x in self.check.invalid()]


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_float(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_bool(v):
    return isinstance(v, bool) or type(v).__name__ == "bool_"


def _as_scalar(v):
    """A bool, int or float as itself (numpy scalars made Python ones)."""
    return bool(v) if _is_bool(v) else int(v) if _is_int(v) else float(v)


_SCALAR_TYPES = {
    INT: (_is_int, int), LONG: (_is_int, int), FLOAT: (_is_float, float),
    STRING: (lambda v: isinstance(v, str), str), BOOLEAN: (_is_bool, bool),
    BLOCK: (_is_int, int), SCALAR: (lambda v: _is_float(v) or _is_bool(v), _as_scalar),
}
_LIST_TYPES = {INTS: INT, LONGS: LONG, FLOATS: FLOAT, STRINGS: STRING, BOOLEANS: BOOLEAN,
               BLOCKS: BLOCK, SCALARS: SCALAR}


class Attr:
    """A typed attribute with a default (``None``: required) and an optional value check."""

    __slots__ = ("name", "type", "default", "doc", "check")

    def __init__(self, name: str, type: int, default=None, doc: str = "", check=None):
        self.name = name
        self.type = type
        self.doc = doc
        self.check = check
        self.default = None if default is None else self.coerce("<proto>", default)

    def coerce(self, op_type: str, value):
        """Type-check and normalise a value (lists, and a single element of a list type, become
        tuples); raise naming op and attribute."""
        if self.type in _SCALAR_TYPES:
            ok, cast = _SCALAR_TYPES[self.type]
            good = ok(value)
            value = cast(value) if good else value
        else:
            ok, cast = _SCALAR_TYPES[_LIST_TYPES[self.type]]
            if ok(value):   # a single element stands for a one-element list: dim=0, axes=1
                value = (value,)
            good = isinstance(value, (list, tuple)) and all(ok(x) for x in value)
            value = tuple(cast(x) for x in value) if good else value
        if not good:
            raise InvalidArgumentError(
                f"{op_type}: attribute '{self.name}' expects {_TYPE_NAMES[self.type]}, "
                f"received {value!r} ({type(value).__name__})")
        if self.check is not None and not self.check(value):
            raise InvalidArgumentError(
                f"{op_type}: attribute '{self.name}' must be {self.check.describe()}, "
                f"received {value!r}")
        return value
