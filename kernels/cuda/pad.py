"""pad3d and its gradient on the GPU: the CPU kernels with the device array module (the source
cells are computed on the host, once per geometry, and copied over by ``asarray``)."""
from ..cpu import pad as cpu
from .device import cuda_kernel, on_device

cuda_kernel("pad3d")(on_device(cpu.pad3d))
cuda_kernel("pad3d_grad")(on_device(cpu.pad3d_grad))
