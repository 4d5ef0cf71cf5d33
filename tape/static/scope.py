"""Scope: where a static run keeps its values, in a hierarchy (the seed design's stack frames).

A Scope maps names to ScopeVars. ``find_var`` looks here, then in the parent, and so on; ``var``
creates in this scope. The Executor keeps persistable values (parameters, optimizer state) in an
outer scope across runs and the temporaries of one run in a child scope it drops afterwards.
"""
from __future__ import annotations


class ScopeVar:
    """One named value of a scope: ``value`` is an array (or None until something writes it)."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value=None):
        self.name = name
        self.value = value

    def __repr__(self):
        what = "empty" if self.value is None else f"shape={getattr(self.value, 'shape', '?')}"
        return f"ScopeVar({self.name}, {what})"


class Scope:
    """Named values with a parent: ``var(name)`` creates or returns one here, ``find_var(name)``
    walks up the parents, ``new_scope()`` makes a child, ``drop_kids()`` forgets the children.

    >>> scope = Scope()
    >>> scope.var("w").value = np.zeros(3)
    >>> scope.new_scope().find_var("w").value
    array([0., 0., 0.])
    """

    __slots__ = ("parent", "_vars", "_kids")

    def __init__(self, parent: Scope | None = None):
        self.parent = parent
        self._vars: dict[str, ScopeVar] = {}
        self._kids: list[Scope] = []

    def var(self, name: str) -> ScopeVar:
        """The variable ``name`` of this scope (not a parent's), created empty if missing."""
        v = self._vars.get(name)
        if v is None:
            v = self._vars[name] = ScopeVar(name)
        return v

    def find_var(self, name: str) -> ScopeVar | None:
        """The variable ``name`` here or in the nearest ancestor that has it; None if none does."""
        scope = self
        while scope is not None:
            v = scope._vars.get(name)
            if v is not None:
                return v
            scope = scope.parent
        return None

    def own_var(self, name: str) -> ScopeVar | None:
        """The variable ``name`` of this scope only (None if a parent's or missing)."""
        return self._vars.get(name)

    def erase(self, names) -> None:
        """Forget the variables ``names`` of this scope (not a parent's)."""
        for name in names:
            self._vars.pop(name, None)

    def new_scope(self) -> Scope:
        kid = Scope(self)
        self._kids.append(kid)
        return kid

    def drop_kids(self) -> None:
        self._kids.clear()

    def kids(self) -> list[Scope]:
        return list(self._kids)

    def local_var_names(self) -> list[str]:
        return sorted(self._vars)

    def __repr__(self):
        return f"Scope({len(self._vars)} vars, {len(self._kids)} kids)"


_global_scope = Scope()


def global_scope() -> Scope:
    """The process-wide scope the Executor uses when neither the call nor the program has one."""
    return _global_scope
