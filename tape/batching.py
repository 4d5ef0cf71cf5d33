"""Running the pending ops a lazy value needs."""
from __future__ import annotations

from .dispatch import invoke
from .pending import arrays_of


def run_ops(ops: list) -> None:
    """Run ``ops`` (pending, in record order, with everything they read among them or run)."""
    for op in ops:
        run_one(op)


def run_one(op) -> None:
    """Run one LazyOp's kernel on its inputs' values; it keeps its results, drops its inputs."""
    op.results = invoke(op.plan, arrays_of(op), None, op.names)
    op.args = None
