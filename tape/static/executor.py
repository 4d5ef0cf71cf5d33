"""Executor: runs a program's ops with the registered shape rules and kernels of the eager tape."""
from __future__ import annotations

from ..errors import InvalidArgumentError
from ..place import CPU, host_array
from .plan import Plan, plan_key
from .program import FEED_HOLDER, FETCH_HOLDER, Program, desc_of
from .scope import Scope, global_scope

# Plans kept per Executor (one per distinct program, feeds, fetches and targets).
_PLANS_KEPT = 32


class Executor:
    """Runs programs on ``place``.

    ``run`` feeds, prunes the program to what the fetches and targets need, and runs the kept
    ops in order: persistable variables live in the scope (the given one, else the program's,
    else the global scope) across runs, temporaries in a child scope dropped after the run.
    Feeds and the persistable values a run reads are moved to ``place`` (once: the scope then
    holds them there), and fetched values come back as numpy arrays, as Paddle's do. The pruned
    program is prepared once and reused by later runs of the same program, feeds, fetches and
    targets while the program is unchanged (``tape.static.plan``).
    ``last_run_ops`` lists the op types the last run executed.

    >>> exe = Executor(tape.CPUPlace())
    >>> (out,) = exe.run(program, feed={"input_0": x}, fetch_list=program.fetch_names)
    """

    def __init__(self, place=CPU):
        self.place = place
        self.last_run_ops: list[str] = []
        self._plans: dict = {}

    def run(self, program, feed: dict | None = None, fetch_list=None, scope: Scope | None = None,
            targets=None) -> list:
        """Run ``program`` and return the arrays of ``fetch_list`` (names, or objects with a
        ``.name``), in order.

        ``feed`` maps variable names to arrays, each matching its VarDesc (-1 dims are free);
        ``targets`` are further ops (OpDescs of the program, e.g. optimizer updates or a
        checkpoint) and variables to run, whose values are not returned.
        """
        feed = dict(feed or {})
        if isinstance(fetch_list, str):
            fetch_list = [fetch_list]
        fetch_names = [_name(f, "fetch") for f in fetch_list or ()]
        if scope is None:
            scope = program.scope if isinstance(program, Program) else global_scope()
        plan = self._plan(desc_of(program), list(feed), fetch_names, targets)
        plan.take_from_scope(scope, self.place)
        fed = plan.feed_values(feed, self.place)
        local = scope.new_scope()
        self.last_run_ops = ran = []
        try:
            local.var(FEED_HOLDER).value = fed
            for name in plan.arrays:
                local.var(name).value = []
            fetched = local.var(FETCH_HOLDER).value = {}
            for step in plan.steps:
                ran.append(step.op.type)
                step.run(self.place, scope, local)
        finally:
            scope.drop_kids()
        return [host_array(fetched[plan.fetch_cols[name]]) for name in fetch_names]

    def _plan(self, desc, feed_names: list, fetch_names: list, targets) -> Plan:
        key = plan_key(desc, feed_names, fetch_names, targets)
        plan = self._plans.get(key)
        if plan is None or not plan.current(desc):
            plan = Plan(desc, feed_names, fetch_names, targets, self.place)
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.clear()
            self._plans[key] = plan
        return plan


def _name(v, role: str) -> str:
    name = v if isinstance(v, str) else getattr(v, "name", None)
    if not isinstance(name, str):
        raise InvalidArgumentError(f"Executor.run: a {role} must be a variable name, received "
                                   f"{type(v).__name__}")
    return name
