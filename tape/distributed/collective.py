"""Collectives on Variables and layers: allreduce, broadcast_parameters, barrier."""
from __future__ import annotations

from .. import world
from ..errors import InvalidArgumentError
from ..tape import no_grad


def allreduce(variable, op: str = "sum"):
    """The sum (``op="sum"``) or mean (``op="mean"``) of ``variable`` over every rank: a new
    Variable, recorded on the tape as Paddle's ``c_allreduce_sum`` (then a ``scale`` by
    1 / world_size for the mean), so gradients flow through it as through Paddle's.

    >>> total = tape.distributed.allreduce(tape.Variable(np.array([rank()])), op="sum")
    """
    from .. import ops
    if op not in ("sum", "mean"):
        raise InvalidArgumentError(f"tape.distributed.allreduce: op must be 'sum' or 'mean', "
                                   f"received {op!r}")
    out = ops.c_allreduce_sum(variable)
    if op == "mean" and world.world_size() > 1:
        out = ops.scale(out, scale=1.0 / world.world_size())
    return out


def parameters_of(layer) -> list:
    """The parameters of a Layer (``params()``), or the list of Variables given."""
    params = layer.params() if hasattr(layer, "params") else list(layer)
    for p in params:
        if not hasattr(p, "desc"):
            raise InvalidArgumentError(f"tape.distributed: expected a Layer or a list of "
                                       f"Variables, received an item of type "
                                       f"{type(p).__name__}")
    return params


def broadcast_parameters(layer, root: int = 0) -> None:
    """Give every rank rank ``root``'s values of the parameters of ``layer`` (a Layer, or a
    list of Variables), in place: all ranks then start from the same model. One MPI_Bcast per
    parameter, through Paddle's ``c_broadcast``."""
    from .. import ops
    with no_grad():
        for p in parameters_of(layer):
            received = ops.c_broadcast(p, root=root)
            if received is not p:
                p.value()[...] = received.value()


def barrier() -> None:
    """Wait until every rank reaches this point (or fail after the timeout)."""
    comm = world.communicator(0, "barrier")
    if comm is not None:
        world.run_collective(comm.Ibarrier, "barrier")

