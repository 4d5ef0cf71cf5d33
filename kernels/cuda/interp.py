"""bilinear_interp_v2 and nearest_interp_v2 on the GPU: the CPU kernels with the device array
module, so their two GEMMs run on cuBLAS; the per-axis weight matrices are built on the host
(small, once per geometry) and copied over by the matmul's ``asarray``."""
from ..cpu import interp as cpu
from .device import cuda_kernel, on_device, on_device_using

_resize = {"_resize": on_device(cpu._resize)}
for _op in ("bilinear_interp_v2", "nearest_interp_v2"):
    cuda_kernel(_op)(on_device_using(cpu.interp_v2, _resize))
    cuda_kernel(_op + "_grad")(on_device_using(cpu.interp_v2_grad, _resize))
