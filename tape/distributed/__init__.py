"""Data-parallel training over MPI (mpi4py on Open MPI): one model per process, the same result.

Launch with ``mpirun -np N python train.py``; in the script::

    tape.distributed.init()                          # join the job (reads mpirun's environment)
    model = tape.distributed.DataParallel(model)     # rank 0's parameters, averaged gradients
    idx = tape.distributed.shard(n, rank(), world_size(), seed, epoch)   # this rank's examples

``allreduce`` and ``broadcast_parameters`` are the collectives underneath; static programs
get theirs from ``tape.static.data_parallel``. Without ``init()`` a process is a world of one.
"""
from ..world import DistributedError, init, initialized, rank, world_size
from . import checkpoint  # noqa: F401
from .collective import allreduce, barrier, broadcast_parameters
from .data_parallel import DataParallel
from .shard import shard

__all__ = ["DataParallel", "DistributedError", "allreduce", "barrier", "broadcast_parameters",
           "checkpoint", "init", "initialized", "rank", "shard", "world_size"]
