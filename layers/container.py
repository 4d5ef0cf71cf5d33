"""LayerList, ParameterList, ParameterDict: containers a Layer registers, as Paddle's and
PyTorch's.

A plain list, tuple or dict held by a Layer is registered too; these add the checks (only
Layers, only parameters) and the names users of Paddle and PyTorch expect.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from tape.errors import InvalidArgumentError
from tape.variable import Variable

from .layer import Layer


def _check_layer(container: str, value) -> Layer:
    if not isinstance(value, Layer):
        raise InvalidArgumentError(f"{container}: expected a Layer, received "
                                   f"{type(value).__name__}")
    return value


def _check_parameter(container: str, value) -> Variable:
    if not (isinstance(value, Variable) and not value.stop_gradient and value.desc.persistable):
        raise InvalidArgumentError(
            f"{container}: expected a parameter (a persistable Variable with "
            f"stop_gradient=False, as Layer.create_parameter makes), received "
            f"{type(value).__name__}{'' if not isinstance(value, Variable) else ' ' + value.name}")
    return value


class _Sequence(Layer):
    """A list of members, each checked by ``check``, held as ``self._items``."""

    def __init__(self, items: Iterable = ()):
        self._items = [self.check(type(self).__name__, x) for x in items]

    def check(self, container, value):
        raise NotImplementedError

    def append(self, value) -> _Sequence:
        self._items.append(self.check(type(self).__name__, value))
        return self

    def extend(self, values: Iterable) -> _Sequence:
        for value in values:
            self.append(value)
        return self

    def insert(self, index: int, value) -> None:
        self._items.insert(index, self.check(type(self).__name__, value))

    def __getitem__(self, index):
        found = self._items[index]
        return type(self)(found) if isinstance(index, slice) else found

    def __setitem__(self, index: int, value) -> None:
        self._items[index] = self.check(type(self).__name__, value)

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def named_members(self):
        # keys "0", "1", ... as in Paddle and PyTorch
        return ((str(i), x) for i, x in enumerate(self._items))


class LayerList(_Sequence):
    """A list of layers, registered with the layer that holds it (``params()``,
    ``state_dict()`` keys ``blocks.0.w``, ``train()``/``eval()``, ``to()``).

    >>> self.blocks = LayerList(Linear(8, 8, act="relu") for _ in range(3))
    >>> for block in self.blocks:
    ...     x = block(x)
    """

    check = staticmethod(_check_layer)


class ParameterList(_Sequence):
    """A list of parameters, registered with the layer that holds it.

    >>> self.W = ParameterList(self.create_parameter((4, 3)) for _ in "iou")
    """

    check = staticmethod(_check_parameter)


class ParameterDict(Layer):
    """A dict of parameters by string key, registered with the layer that holds it
    (``state_dict()`` keys ``gates.i``, ...).

    >>> self.gates = ParameterDict({g: self.create_parameter((4, 3)) for g in "iou"})
    >>> self.gates["i"].shape
    (4, 3)
    """

    def __init__(self, parameters: Mapping | Iterable = ()):
        self._items = {}
        self.update(parameters)

    def update(self, parameters: Mapping | Iterable) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for key, value in pairs:
            self[key] = value

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str):
            raise InvalidArgumentError(f"ParameterDict: keys must be str, received "
                                       f"{type(key).__name__}")
        self._items[key] = _check_parameter("ParameterDict", value)

    def __getitem__(self, key: str) -> Variable:
        return self._items[key]

    def __contains__(self, key) -> bool:
        return key in self._items

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def keys(self):
        return self._items.keys()

    def values(self):
        return self._items.values()

    def items(self):
        return self._items.items()

    def named_members(self):
        return iter(self._items.items())
