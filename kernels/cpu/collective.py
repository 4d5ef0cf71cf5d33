"""c_allreduce_sum, c_identity and c_broadcast over MPI (mpi4py), on host arrays.

A collective starts non-blocking and is waited for with tape.distributed's timeout, so a rank
whose peer died reports it instead of hanging. In a world of one process each is the identity.
"""
import numpy as np

from tape import dtypes, world
from tape.registry import kernel

_TYPES = (dtypes.FP32, dtypes.FP64, dtypes.INT32, dtypes.INT64)


def allreduce_sum(array: np.ndarray, comm, what: str) -> np.ndarray:
    """The elementwise sum of ``array`` over every rank of ``comm``, a new array."""
    send = np.ascontiguousarray(array)
    out = np.empty_like(send)
    world.run_collective(lambda: comm.Iallreduce(send, out, op=world.mpi().SUM), what)
    return out


def broadcast(array: np.ndarray, root: int, comm, what: str) -> np.ndarray:
    """Rank ``root``'s ``array`` on every rank of ``comm``, a new array."""
    out = np.array(array, order="C", copy=True)
    world.run_collective(lambda: comm.Ibcast(out, root=root), what)
    return out


@kernel("c_allreduce_sum", types=_TYPES)
def c_allreduce_sum(X, ring_id):
    comm = world.communicator(ring_id, "c_allreduce_sum")
    if comm is None:
        return X.copy()
    return allreduce_sum(X, comm, f"c_allreduce_sum of {X.dtype}{X.shape}")


@kernel("c_identity", types=_TYPES)
def c_identity(X, ring_id):
    world.communicator(ring_id, "c_identity")
    return X.copy()


@kernel("c_broadcast", types=_TYPES)
def c_broadcast(X, ring_id, root):
    comm = world.communicator(ring_id, "c_broadcast")
    if comm is None:
        return X.copy()
    return broadcast(X, root, comm, f"c_broadcast of {X.dtype}{X.shape} from rank {root}")
