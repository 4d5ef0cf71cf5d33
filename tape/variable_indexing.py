"""Variable's indexing (``x[...]``, iteration): numpy's rules, recorded as slice, gather,
squeeze2 and unsqueeze2 ops so that gradients flow. ``tape.overloads`` installs it."""
from __future__ import annotations

import numbers

import numpy as np

from . import ops
from .errors import InvalidArgumentError
from .variable import Variable, reading_values_allowed

_END = 2**31 - 1   # slice's "to the end" (its ends attribute is int32 in Paddle)


def _is_mask(k) -> bool:
    if isinstance(k, Variable):
        return k.dtype == np.bool_
    return isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype == np.bool_


def _masked(x: Variable, mask) -> Variable:
    """``x[mask]``: the elements (or sub-arrays) where a bool mask over x's leading axes is
    True, in order, as one new first axis."""
    if isinstance(mask, Variable):
        if not reading_values_allowed():
            raise InvalidArgumentError(
                f"{x.name}[{mask.name}]: the result of a bool Variable mask has a shape known "
                f"only from the mask's values, which a traced program cannot read; use "
                f"tape.ops.where(mask, x, y), or a numpy mask")
        mask = mask.numpy()
    mask = np.asarray(mask, dtype=bool)
    lead = tuple(x.shape[:mask.ndim])
    if mask.ndim > x.ndim or any(n not in (m, -1) for n, m in zip(lead, mask.shape)):
        raise IndexError(f"{x.name}[mask]: a bool mask of shape {list(mask.shape)} does not "
                         f"match the leading axes of shape {list(x.shape)}")
    rows = x.reshape(-1, *x.shape[mask.ndim:]) if mask.ndim != 1 else x
    return ops.gather(rows, Variable(np.flatnonzero(mask).astype(np.int64), place=x.place))


def _take(x: Variable, index, axis: int) -> Variable:
    """The sub-arrays at ``index`` (an int Variable, list or array of any rank) along ``axis``,
    whose axis is replaced by index's axes."""
    if not isinstance(index, Variable):
        array = np.asarray(index)
        n = x.shape[axis]
        if array.dtype.kind not in "iu":
            raise IndexError(f"{x.name}[...]: an index list must hold ints, received {index!r}")
        if n >= 0 and array.size and not (-n <= array.min() and array.max() < n):
            raise IndexError(f"{x.name}[...]: index {index!r} is out of bounds for axis {axis} "
                             f"with size {n}")
        index = Variable((array % n if n > 0 else array).astype(np.int64), place=x.place)
    if index.ndim <= 1:
        return ops.gather(x, index, axis=axis)
    taken = ops.gather(x, index.reshape(-1), axis=axis)
    return taken.reshape([0] * axis + list(index.shape) + list(x.shape[axis + 1:]))


def _expand_ellipsis(x: Variable, key: tuple) -> tuple:
    """``key`` with its Ellipsis (or the missing trailing axes) as full slices."""
    used = sum(k is not None and k is not Ellipsis for k in key)
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if used > x.ndim or len(ellipses) > 1:
        raise IndexError(f"{x.name}[...]: too many indices ({used}) for shape {list(x.shape)}"
                         if used > x.ndim else f"{x.name}[...]: more than one Ellipsis")
    fill = (slice(None),) * (x.ndim - used)
    if ellipses:
        return key[:ellipses[0]] + fill + key[ellipses[0] + 1:]
    return key + fill


def _getitem(self, key) -> Variable:
    """numpy indexing, recorded as ops so gradients flow: ints, slices (with steps), ``...``,
    None, an int list/array/Variable (gather), and a bool mask (a numpy one, or a bool Variable
    outside ``tape.static.trace``)."""
    key = key if isinstance(key, tuple) else (key,)
    if any(_is_mask(k) for k in key):
        if len(key) != 1:
            raise IndexError(f"{self.name}[...]: a bool mask must be the only index")
        return _masked(self, key[0])
    key = _expand_ellipsis(self, key)
    axes, starts, ends, dropped, new_axes, stepped = [], [], [], [], [], []
    advanced = None          # (axis, index) of an int list/array/Variable
    picked = []              # key positions of ints and advanced indices
    axis = out = 0           # the input axis and the output position each entry reaches
    for position, k in enumerate(key):
        if k is None:
            new_axes.append(out)
            out += 1
            continue
        n = self.shape[axis]
        if isinstance(k, numbers.Integral) and not isinstance(k, bool):
            if n >= 0 and not -n <= k < n:
                raise IndexError(f"{self.name}[...]: index {k} is out of bounds for axis {axis} "
                                 f"with size {n}")
            start = int(k) + n if k < 0 and n >= 0 else int(k)
            axes.append(axis), starts.append(start), dropped.append(axis)
            ends.append(_END if start == -1 else start + 1)
            picked.append(position)
        elif isinstance(k, slice):
            if k.step not in (None, 1):
                if n < 0:
                    raise IndexError(f"{self.name}[...]: a stepped slice needs the size of axis "
                                     f"{axis}, unknown in shape {list(self.shape)}")
                stepped.append((axis, np.arange(*k.indices(n))))
            elif k.start is not None or k.stop is not None:
                axes.append(axis), starts.append(k.start or 0)
                ends.append(_END if k.stop is None else k.stop)
            out += 1
        elif isinstance(k, (Variable, list, np.ndarray)) and advanced is None:
            advanced = (axis, k)
            picked.append(position)
            out += np.ndim(k) if not isinstance(k, Variable) else k.ndim
        else:
            raise IndexError(f"{self.name}[...]: unsupported index {k!r} (ints, slices, ..., "
                             f"None, and one int list/array/Variable or a bool mask are)")
        axis += 1
    if advanced is not None and dropped and picked != list(range(picked[0], picked[-1] + 1)):
        raise IndexError(f"{self.name}[...]: ints apart from the index array would move its axes "
                         f"first (numpy's rule); index in two steps instead")
    y = ops.slice(self, axes=axes, starts=starts, ends=ends) if axes else self
    for a, index in stepped:
        y = ops.gather(y, Variable(index, place=self.place), axis=a)
    if advanced is not None:
        a, index = advanced
        y = _take(y, index, a)
        grown = y.ndim - self.ndim
        dropped = [d + grown if d > a else d for d in dropped]
    if dropped:
        y = ops.squeeze2(y, axes=dropped)
    return ops.unsqueeze2(y, axes=new_axes) if new_axes else y


def _iter(self):
    for i in range(len(self)):
        yield self[i]


Variable.__getitem__ = _getitem
Variable.__iter__ = _iter
