"""expand_v2, tile, index_select, argsort, cumsum and their gradients on the GPU: the CPU
kernels with the device array module (cupy has numpy's broadcast_to, tile, take, cumsum and
sorts); index_select's scatter-add and argsort's order are gather's and top_k_v2's GPU ones."""
from ..cpu import rearrange as cpu
from . import indexing
from .device import KERNELS, cuda_kernel, on_device

_sum_to, _cumsum = on_device(cpu._sum_to), on_device(cpu._cumsum)
for _op in ("expand_v2", "tile", "tile_grad"):
    cuda_kernel(_op)(on_device(getattr(cpu, _op)))
cuda_kernel("expand_v2_grad")(on_device(cpu.expand_v2_grad, _sum_to=_sum_to))
cuda_kernel("index_select")(on_device(cpu.index_select, _checked_index=indexing._checked_index))
cuda_kernel("index_select_grad")(on_device(cpu.index_select_grad,
                                           _checked_index=indexing._checked_index,
                                           gather_grad=KERNELS["gather_grad"]))
cuda_kernel("argsort")(on_device(cpu.argsort, _sort_order=indexing._sort_order))
cuda_kernel("argsort_grad")(KERNELS["top_k_v2_grad"])
for _op in ("cumsum", "cumsum_grad"):
    cuda_kernel(_op)(on_device(getattr(cpu, _op), _cumsum=_cumsum))
