"""The constants of a function written out as Python lines (the unit schedule's forward and
backward): each object bound once in the function's namespace, under a name its lines use."""
from __future__ import annotations


class CodeConstants:
    """A written function's ``namespace``, and the name of each constant bound in it."""

    def __init__(self, namespace: dict):
        self.namespace = namespace
        self._names = {}    # id(value) -> its name (the namespace keeps the value alive)

    def constant(self, value) -> str:
        """The name ``value`` is bound to in the namespace: one per object."""
        name = self._names.get(id(value))
        if name is None:
            name = self._names[id(value)] = f"c{len(self._names)}"
            self.namespace[name] = value
        return name
