"""A kernel function and how its parameters bind to an op's inputs and attributes."""
from __future__ import annotations

import dis
import inspect
import itertools
import types
from typing import TYPE_CHECKING

from .desc import grad_name
from .errors import NotFoundError

if TYPE_CHECKING:
    from .registry import OpInfo


class Kernel:
    """A kernel function and how its parameters bind to inputs and attributes.

    ``call(ins, attrs, wants)`` runs it on ``{slot: array}``; ``positional(attrs, wants, *arrays)``
    runs it on one array (or list, or None) per input slot in the op's slot order, which spares
    the eager hot path a dict per call. ``for_attrs(attrs, dtype)`` is the ``positional`` call of
    one CallPlan: a kernel function with a ``with_attrs(attrs, dtype)`` attribute may return
    there a function of the same arguments with the attributes' decisions made once (``scale``:
    ``x * c`` with nothing else to decide), or None for the general one. ``reads()`` says which
    input slots it reads, for the unused-input check: the slots whose parameters its body
    loads, found once from the bytecode (the checks run ``call``, the function itself).
    ``adding_call()`` is the same call of the function's ``add_into``, if it has one.
    """

    __slots__ = ("fn", "call", "positional", "_params", "_reads", "_positional_args")

    def __init__(self, fn, info: OpInfo):
        self.fn = fn
        slots = {s.name for s in info.inputs}
        self._params = {}    # parameter -> the input slot it binds
        self._reads = None
        args = []
        positional = []     # the same arguments, inputs taken by slot position
        order = {s.name: i for i, s in enumerate(info.inputs)}
        for p in inspect.signature(fn).parameters:
            if p in slots:
                self._params[p] = p
            elif p[:1] == "d" and grad_name(p[1:]) in slots:
                self._params[p] = grad_name(p[1:])
            elif p in info.attrs:
                args.append(f"attrs[{p!r}]")
                positional.append(f"attrs[{p!r}]")
                continue
            elif p == "wants":
                args.append(p)
                positional.append(p)
                continue
            else:
                raise NotFoundError(
                    f"{info.type}: kernel {self.fn.__name__} has parameter '{p}', which names "
                    f"no input slot, gradient slot (d<Slot>) or attribute of the op")
            args.append(f"ins.get({self._params[p]!r})")
            positional.append(f"a{order[self._params[p]]}")
        # A generated lambda binds arguments without a per-call loop over the parameters:
        # this runs for every op of every iteration.
        self.call = eval(f"lambda ins, attrs, wants: fn({', '.join(args)})", {"fn": self.fn})
        arrays = "".join(f", a{i}" for i in range(len(info.inputs)))
        self.positional = eval(f"lambda attrs, wants{arrays}: fn({', '.join(positional)})",
                               {"fn": self.fn})
        self._positional_args = (arrays, ", ".join(positional))

    def for_attrs(self, attrs: dict, dtype: int):
        with_attrs = getattr(self.fn, "with_attrs", None)
        fixed = None if with_attrs is None else with_attrs(attrs, dtype)
        return self.positional if fixed is None else fixed

    def adding_call(self):
        """``add_into(targets, attrs, wants, *arrays)``, when the kernel function has an
        ``add_into`` attribute (a function of ``targets`` and then the kernel's own parameters),
        else None. ``targets`` holds one entry per output: an array to add that output into in
        place, or None; it returns what the kernel returns, but None for each output it added.
        Such a kernel returns new arrays that nothing else holds. Eager backward uses it to add
        a gradient into the sum it keeps, without making it first (an embedding lookup's rows
        into the table's gradient)."""
        into = getattr(self.fn, "add_into", None)
        if into is None:
            return None
        arrays, arguments = self._positional_args
        return eval(f"lambda targets, attrs, wants{arrays}: into(targets, {arguments})",
                    {"into": into})

    def reads(self) -> tuple[frozenset, frozenset]:
        """``(read, shape_only)``: the input slots whose values the kernel's body loads, and
        those it loads only to take ``.shape``/``.dtype``/``.ndim``/``.size``."""
        if self._reads is None:
            loaded, meta = body_loads(self.fn, set(self._params))
            self._reads = (frozenset(self._params[p] for p in loaded),
                           frozenset(self._params[p] for p in meta - loaded))
        return self._reads


_META_ATTRIBUTES = frozenset({"shape", "dtype", "ndim", "size"})
_CELL_LOADS = frozenset({"LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"})


def body_loads(fn, params: set) -> tuple[set, set]:
    """``(loaded, meta)``: the names of ``params`` that ``fn``'s body loads (directly, or in a
    nested function or comprehension that closes over them), and those it loads at least once
    only to take ``.shape``/``.dtype``/``.ndim``/``.size``. A callable without Python bytecode
    counts as loading every parameter."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return set(params), set()
    loaded, meta = set(), set()
    _scan_loads(code, params, False, loaded, meta)
    return loaded, meta


def _scan_loads(code, names: set, nested: bool, loaded: set, meta: set) -> None:
    instructions = list(dis.get_instructions(code))
    for ins, following in itertools.zip_longest(instructions, instructions[1:]):
        if ins.opname not in _CELL_LOADS and (nested or not ins.opname.startswith("LOAD_FAST")):
            continue
        # LOAD_FAST_LOAD_FAST (3.13) loads two names; only the second meets the next opcode
        pair = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
        for i, name in enumerate(pair):
            if name not in names:
                continue
            for_meta = (i == len(pair) - 1 and following is not None
                        and following.opname == "LOAD_ATTR"
                        and following.argval in _META_ATTRIBUTES)
            (meta if for_meta else loaded).add(name)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner = names & set(const.co_freevars)
            if inner:
                _scan_loads(const, inner, True, loaded, meta)
