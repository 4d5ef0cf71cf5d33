"""Checkpoints of a data-parallel run: rank 0 writes (atomically), every rank reads.

Every rank holds the same model and optimizer state, so one copy is written, by rank 0,
through ``tape.checkpoint.save`` (a temporary file renamed over the target). The others wait
until it is on disk, so a rank that reads it next finds it whole. A checkpoint holds no trace
of how many ranks wrote it: a run resumes on any number of ranks.
"""
from __future__ import annotations

from .. import checkpoint, world
from .collective import barrier


def save(path, state: dict) -> bool:
    """Rank 0 writes ``state`` to ``path`` (``tape.checkpoint.save``); every rank returns once
    it is written. Returns whether this rank wrote it. An error on rank 0 aborts the job."""
    wrote = world.rank() == 0
    if wrote:
        checkpoint.save(path, state)
    barrier()
    return wrote


def load(path) -> dict:
    """``tape.checkpoint.load(path)`` on every rank."""
    return checkpoint.load(path)
