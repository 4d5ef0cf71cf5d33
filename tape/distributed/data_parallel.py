"""DataParallel: one model per rank, gradients averaged over the ranks during backward.

As Horovod and PyTorch's DDP do, the parameters are grouped into buckets of about
``bucket_mb`` megabytes, in reverse order of the model's parameters (about the order backward
finishes them). Backward tells (``tape.backward.grad_ready_hooks``) when a parameter's gradient
is final; once a bucket's gradients all are (and the buckets before it have started: every
rank must start the same exchanges in the same order), their exchange starts: a non-blocking
reduce-scatter then allgather in point-to-point messages sent straight from the gradient arrays
(exchange.py), while backward goes on computing the gradients of earlier layers. When
backward ends, buckets with a parameter that got no gradient here start too (zeros for it),
every bucket is waited for, and each ``.grad`` becomes the mean over the ranks. A parameter
gets a ``.grad`` if it got one on any rank, so the ranks' optimizers always update the same
parameters. As DDP's ``gradient_as_bucket_view``, each averaged ``.grad`` is a
view of its bucket's buffer, which the next backward overwrites: copy one to keep it.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np

from .. import backward as _backward
from .. import world
from ..desc import GRAD_SUFFIX
from ..errors import InvalidArgumentError
from ..variable import Variable
from .collective import broadcast_parameters, parameters_of
from .exchange import BucketExchange


class _Bucket:
    """Parameters of one dtype whose gradients travel together: their mean over the ranks
    lands in one buffer (``exchange``), and one counter per parameter (how many ranks had a
    gradient for it) travels in a small allreduce of its own."""

    __slots__ = ("params", "offsets", "size", "dtype", "waiting", "buffer", "had", "request",
                 "exchange")

    def __init__(self, params: list):
        self.params = params
        self.offsets = np.cumsum([0] + [p.size for p in params])
        self.size = int(self.offsets[-1])
        self.dtype = params[0].dtype
        self.buffer = None      # made once, then reused: a fresh one would page-fault every step
        self.had = np.zeros(len(params), np.int64)
        self.exchange = None
        self.reset()

    def reset(self) -> None:
        self.waiting = len(self.params)
        self.request = None

    def start(self, comm, scale: float) -> None:
        """Send the gradients (zeros for a parameter without one here) to be averaged."""
        if self.buffer is None:
            self.buffer = np.empty(self.size, self.dtype)
        grads = []
        for i, p in enumerate(self.params):
            self.had[i] = p.grad is not None
            g = (np.zeros(p.size, self.dtype) if p.grad is None else
                 np.ascontiguousarray(p.grad.value(), self.dtype).reshape(-1))
            if np.may_share_memory(g, self.buffer):   # last step's .grad, kept: the exchange
                g = g.copy()                          # writes the buffer while it sends g
            grads.append(g)
        self.request = comm.Iallreduce(world.mpi().IN_PLACE, self.had, op=world.mpi().SUM)
        self.exchange.start(grads, self.buffer, scale)

    def unpack(self) -> None:
        for i, p in enumerate(self.params):
            if self.had[i]:
                g = self.buffer[self.offsets[i]:self.offsets[i + 1]].reshape(p.shape)
                p.grad = Variable(g, name=p.name + GRAD_SUFFIX, place=p.place)
            else:
                p.grad = None
        self.exchange.release()


def _buckets(params: list, bucket_bytes: float) -> list:
    """Parameters in reverse order, cut into buckets of about ``bucket_bytes`` each (one dtype
    per bucket); the same on every rank, for the same model."""
    buckets, current, size = [], [], 0
    for p in reversed(params):
        if current and (size >= bucket_bytes or p.dtype != current[0].dtype):
            buckets.append(_Bucket(current))
            current, size = [], 0
        current.append(p)
        size += p.size * p.dtype.itemsize
    if current:
        buckets.append(_Bucket(current))
    return buckets


class DataParallel:
    """Train ``layer`` on every rank with the mean of the ranks' gradients.

    Construction broadcasts rank ``root``'s parameters, so every rank starts from the same
    model. Call it as the layer; after ``loss.backward()`` each parameter's ``.grad`` is the
    mean over the ranks (each rank's loss being the mean over its part of the batch, the step is
    the step of one process on the whole batch), and any optimizer steps as usual.

    >>> tape.distributed.init()
    >>> model = tape.distributed.DataParallel(Net())
    >>> loss = F.cross_entropy(model(x_part), y_part)
    >>> loss.backward()                  # gradients are averaged while backward runs
    >>> opt(model.params())

    ``bucket_mb``: megabytes of gradients per exchange. ``communication_seconds`` adds up the
    time this rank spent on communication that backward did not hide (starting the exchanges,
    summing its chunks, waiting, setting the ``.grad``), ``communication_cpu_seconds`` the CPU
    time of it (the copies and sums, and the polling of the waits).
    """

    def __init__(self, layer, bucket_mb: float = 4.0, root: int = 0):
        if not bucket_mb > 0:
            raise InvalidArgumentError(f"DataParallel: bucket_mb must be > 0, received "
                                       f"{bucket_mb}")
        self.layer = layer
        self._params = parameters_of(layer)
        comm = world.communicator(0, "DataParallel")
        # a communicator of its own: its messages never meet the program's
        self._comm = comm.Dup() if comm is not None else None
        self.communication_seconds = 0.0
        self.communication_cpu_seconds = 0.0
        self._sync = True
        broadcast_parameters(self._params, root)
        self._buckets = _buckets(self._params, bucket_mb * 1e6)
        self._bucket_of = {p.desc: b for b in self._buckets for p in b.params}
        if self._comm is not None:
            tags = self._comm.Get_attr(world.mpi().TAG_UB) + 1     # MPI promises >= 32768
            if 2 * len(self._buckets) > tags:
                raise InvalidArgumentError(
                    f"DataParallel: bucket_mb={bucket_mb} cuts the gradients into "
                    f"{len(self._buckets)} buckets; this MPI has message tags for "
                    f"{tags // 2}: give a larger bucket_mb")
            for k, b in enumerate(self._buckets):
                b.exchange = BucketExchange(self._comm, 2 * k, b.offsets, b.size, b.dtype)
        self._started = []
        if self._comm is not None:
            _backward.grad_ready_hooks.append(self._on_grad_ready)

    def __call__(self, *args, **kwargs):
        return self.layer(*args, **kwargs)

    def params(self) -> list:
        return list(self._params)

    def close(self) -> None:
        """Stop taking part in backward (this model's gradients are then left as they are)."""
        if self._on_grad_ready in _backward.grad_ready_hooks:
            _backward.grad_ready_hooks.remove(self._on_grad_ready)

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward keeps the gradients local (they accumulate in ``.grad``); the first
        backward after it averages what accumulated. For gradient accumulation."""
        self._sync = False
        try:
            yield
        finally:
            self._sync = True

    @property
    def bucket_sizes(self) -> list:
        """Parameters per bucket, in the order backward sends them."""
        return [len(b.params) for b in self._buckets]

    @property
    def buckets_started(self) -> int:
        """How many buckets' allreduces this backward has started so far."""
        return len(self._started)

    def _on_grad_ready(self, leaf) -> None:
        """Backward's hook: ``leaf``'s gradient is final (None: backward has ended)."""
        if not self._sync:
            return
        start, cpu_start = time.perf_counter(), time.process_time()
        if leaf is None:
            if self._started or any(b.waiting < len(b.params) for b in self._buckets):
                self._finish()
        else:
            bucket = self._bucket_of.get(leaf.desc)
            if bucket is not None:
                bucket.waiting -= 1
                self._start_ready()
                for b in self._started:   # MPI moves messages on only when called
                    b.exchange.advance()
        self.communication_seconds += time.perf_counter() - start
        self.communication_cpu_seconds += time.process_time() - cpu_start

    def _start_ready(self) -> None:
        """Start the next buckets whose gradients are all final, in bucket order: every rank
        must start the same allreduces in the same order (MPI matches them by order)."""
        while len(self._started) < len(self._buckets):
            bucket = self._buckets[len(self._started)]
            if bucket.waiting:
                return
            self._start(bucket)

    def _start(self, bucket: _Bucket) -> None:
        bucket.start(self._comm, 1.0 / world.world_size())
        self._started.append(bucket)

    def _finish(self) -> None:
        """Start the buckets not started yet (a parameter got no gradient on this rank), wait for
        all and set the averaged gradients."""
        for bucket in self._buckets[len(self._started):]:
            self._start(bucket)
        what = f"the gradient allreduce of {len(self._buckets)} bucket(s)"
        for bucket in self._started:
            bucket.exchange.finish_sum(what)
        world.wait_all([r for b in self._started for r in (b.request, *b.exchange.requests())],
                       what)
        for bucket in self._buckets:
            bucket.unpack()
            bucket.reset()
        self._started = []
