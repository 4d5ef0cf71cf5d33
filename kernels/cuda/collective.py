"""The collective ops on the GPU: through the host over MPI (an MPI built with CUDA support, or
NCCL through cupy.cuda.nccl, would take device buffers directly; see the README)."""
from ..cpu import collective
from .device import cuda_kernel, to_device, to_host


@cuda_kernel("c_allreduce_sum")
def c_allreduce_sum(X, ring_id):
    return to_device(collective.c_allreduce_sum(to_host(X), ring_id))


@cuda_kernel("c_identity")
def c_identity(X, ring_id):
    return to_device(collective.c_identity(to_host(X), ring_id))


@cuda_kernel("c_broadcast")
def c_broadcast(X, ring_id, root):
    return to_device(collective.c_broadcast(to_host(X), ring_id, root))
