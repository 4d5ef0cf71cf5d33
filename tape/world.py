"""The process group: MPI's COMM_WORLD once ``init()`` has run, else a world of one process.

mpi4py is imported by ``init()`` only, so ``import tape`` never loads MPI. Without ``init()``
(and outside ``mpirun``) a process is a world of one: rank 0 of 1, and a collective op is the
identity, which is what it computes on one rank. Inside an ``mpirun`` of several processes a
collective op before ``init()`` is an error rather than a silent world of one.

A rank that fails must not leave the others waiting forever: ``init()`` makes an uncaught
exception abort the whole job (``MPI_Abort``, after printing the error), and every wait on a
collective gives up after ``timeout()`` seconds (``TAPE_DIST_TIMEOUT``, default 300) with an
error naming the rank and what it waited for, then aborts the job.
"""
from __future__ import annotations

import os
import sys
import time
import traceback

from .errors import PreconditionNotMetError, TapeError

# Environment variables by which launchers tell a process its place (Open MPI's, the MPI
# standard's Hydra/MPICH ones, PMIx's, Slurm's).
_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS")
_DEFAULT_TIMEOUT = 300.0
_SPIN_SECONDS = 2e-3     # how long a wait polls without pausing
_yield_core = getattr(os, "sched_yield", lambda: time.sleep(0))
# Open MPI settings that MPI_Init reads from the environment; a value the user set wins.
# Open MPI's non-blocking allreduce (libnbc) picks a binomial tree for few ranks: the whole
# buffer goes to rank 0, which sums alone, and back. Rabenseifner's reduce-scatter then
# allgather (3) moves half as much per rank and splits the summing: 0.95 against 2.8 ms for
# 8 MB on 2 ranks here, as fast as the blocking MPI_Allreduce. (Open MPI itself falls back to
# its default for non-commutative ops and buffers shorter than the number of ranks.)
_OPEN_MPI_DEFAULTS = {"OMPI_MCA_coll_libnbc_iallreduce_algorithm": "3"}


class DistributedError(TapeError):
    """A collective could not complete: another rank failed, died or stopped answering."""


class _World:
    comm = None          # mpi4py's COMM_WORLD after init()
    MPI = None           # the mpi4py.MPI module after init()


_world = _World()


def launched_size() -> int:
    """How many processes the launcher started, from its environment (1 when none did)."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1


def init() -> None:
    """Join the job ``mpirun`` started: reads its environment through MPI_Init (mpi4py).

    Idempotent. Afterwards ``rank()`` and ``world_size()`` are the job's, collectives run over
    MPI, and an uncaught exception on any rank aborts every rank instead of leaving them
    waiting. Raises PreconditionNotMetError, saying what to install, when mpi4py is missing.
    """
    if _world.comm is not None:
        return
    for name, value in _OPEN_MPI_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise PreconditionNotMetError(
            f"tape.distributed.init: mpi4py is not installed ({error}); install Open MPI "
            f"(Debian: openmpi-bin libopenmpi-dev) and then pip install -e '.[dist]'") from None
    _world.MPI, _world.comm = MPI, MPI.COMM_WORLD
    if _world.comm.Get_size() > 1:
        _abort_on_uncaught_exceptions()


def initialized() -> bool:
    return _world.comm is not None


def rank() -> int:
    """This process's rank, 0 .. world_size() - 1 (0 before ``init()``)."""
    return _world.comm.Get_rank() if _world.comm is not None else 0


def world_size() -> int:
    """How many processes train together (1 before ``init()``)."""
    return _world.comm.Get_size() if _world.comm is not None else 1


def communicator(ring_id: int = 0, op: str = "collective"):
    """The mpi4py communicator of ring ``ring_id`` (Paddle's name for a communicator), or None
    for a world of one process. Ring 0 is COMM_WORLD; it is the only ring."""
    if ring_id != 0:
        raise PreconditionNotMetError(f"{op}: ring_id={ring_id} names no communicator; Tape has "
                                      f"one ring, 0 (all processes of the job)")
    if _world.comm is None:
        if launched_size() > 1:
            raise PreconditionNotMetError(
                f"{op}: this process is one of {launched_size()} that the launcher started, but "
                f"tape.distributed.init() has not run; call it before training")
        return None
    return _world.comm if _world.comm.Get_size() > 1 else None


def mpi():
    """The mpi4py.MPI module (after ``init()``)."""
    return _world.MPI


def timeout() -> float:
    """Seconds a rank waits for a collective before it gives up (``TAPE_DIST_TIMEOUT``)."""
    value = os.environ.get("TAPE_DIST_TIMEOUT")
    try:
        return float(value) if value else _DEFAULT_TIMEOUT
    except ValueError:
        raise PreconditionNotMetError(f"TAPE_DIST_TIMEOUT must be a number of seconds, "
                                      f"received {value!r}") from None


def wait_all(requests: list, what: str) -> None:
    """Complete the non-blocking MPI ``requests`` or, past ``timeout()``, abort the job with an
    error naming this rank and ``what`` it waited for. Polls (MPI_Testall), which also drives
    the progress of the operations."""
    if not requests:
        return
    test_all = _world.MPI.Request.Testall
    start = time.monotonic()
    deadline = start + timeout()
    while not test_all(requests):
        now = time.monotonic()
        if now > deadline:
            fail(DistributedError(
                f"rank {rank()} of {world_size()}: {what} did not complete within "
                f"{timeout():g} s (TAPE_DIST_TIMEOUT): another rank has failed, died or "
                f"stopped taking part"))
        # each poll moves the operation on, so poll at once while a peer keeps pace (yielding
        # the core to whatever else is ready: time.sleep(0) would sleep Linux's timer slack,
        # 50-100 us, 0.3 ms more per 8 MB allreduce here); a peer far behind (a busy machine)
        # gets the core instead of a spinning loop
        if now - start < _SPIN_SECONDS:
            _yield_core()
        else:
            time.sleep(1e-4)


def run_collective(start, what: str):
    """Start a non-blocking collective (``start()`` returns its request) and wait for it as
    ``wait_all`` does: a blocking collective that cannot hang."""
    wait_all([start()], what)


def fail(error: BaseException) -> None:
    """Print ``error`` for this rank and abort every rank of the job (no return)."""
    _report(type(error), error, error.__traceback__)
    _world.comm.Abort(1)


def _report(kind, error, trace) -> None:
    lines = traceback.format_exception(kind, error, trace)
    sys.stderr.write(f"tape.distributed: rank {rank()} of {world_size()} failed, aborting the "
                     f"job:\n{''.join(lines)}")
    sys.stderr.flush()


def _abort_on_uncaught_exceptions() -> None:
    """An exception that ends one rank ends the job: the others would otherwise wait in their
    next collective for a rank that is gone."""
    previous = sys.excepthook

    def abort(kind, error, trace):
        if _world.comm is None or issubclass(kind, KeyboardInterrupt):
            previous(kind, error, trace)
            return
        _report(kind, error, trace)
        _world.comm.Abort(1)

    sys.excepthook = abort
