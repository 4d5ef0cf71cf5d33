"""shard: which examples one rank trains on in an epoch (PyTorch's DistributedSampler)."""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError


def shard(n_examples: int, rank: int, world_size: int, seed: int = 0, epoch: int = 0,
          shuffle: bool = True) -> np.ndarray:
    """The indices of the examples rank ``rank`` of ``world_size`` takes in epoch ``epoch``.

    As DistributedSampler: the examples are shuffled by ``(seed, epoch)`` (the same order on
    every rank), padded by repeating from the start up to a multiple of ``world_size``, and
    dealt out in turn: rank r gets positions r, r + world_size, ... So every example is seen
    once per epoch (a few twice, when padded), every rank gets ``ceil(n / world_size)``
    indices, and the k-th batch of b indices of every rank together are positions
    ``k * b * world_size`` to ``(k + 1) * b * world_size - 1`` of the epoch's order: the k-th
    batch of one process with a batch ``world_size`` times larger.

    >>> shard(10, rank=1, world_size=4, seed=0, epoch=3)   # 3 indices
    """
    for name, value in (("n_examples", n_examples), ("world_size", world_size)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidArgumentError(f"shard: {name} must be a positive int, received "
                                       f"{value!r}")
    if not isinstance(rank, (int, np.integer)) or not 0 <= rank < world_size:
        raise InvalidArgumentError(f"shard: rank must be an int in [0, {world_size}), received "
                                   f"{rank!r}")
    if shuffle:
        order = np.random.default_rng([int(seed), int(epoch)]).permutation(n_examples)
    else:
        order = np.arange(n_examples)
    per_rank = -(-n_examples // world_size)
    total = per_rank * world_size
    if total > n_examples:
        order = np.concatenate([order, np.resize(order, total - n_examples)])
    return order[rank:total:world_size]
