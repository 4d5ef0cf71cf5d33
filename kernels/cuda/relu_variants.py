"""ReLU's variants on the GPU: the CPU's numpy kernels with the device array module (ufuncs and
``np.where``, which cupy arrays dispatch), and one numba.cuda pass over the same formulas of
kernels/formulas.py for mish and the gradients that read one array."""
from .. import formulas
from ..cpu import relu_variants as cpu
from .activation import _pointwise
from .device import array_module, cuda_kernel, launch, on_device, pointwise

for _op in ("relu6", "hard_sigmoid", "hard_swish", "swish", "elu", "selu", "silu_grad",
            "elu_grad"):
    cuda_kernel(_op)(on_device(getattr(cpu, _op)))
cuda_kernel("silu")(on_device(cpu.swish))
cuda_kernel("prelu")(on_device(cpu.prelu))
cuda_kernel("prelu_grad")(on_device(cpu.prelu_grad))


@cuda_kernel("mish")
def mish(X, threshold):
    xp = array_module(X)
    out = xp.empty(X.shape, X.dtype)
    launch(pointwise(formulas.mish, inputs=1), out.size, xp.ravel(X), out.reshape(-1),
           (threshold,))
    return out


@cuda_kernel("relu6_grad")
def relu6_grad(Out, dOut):
    return _pointwise(formulas.relu6_grad, Out, dOut)


@cuda_kernel("hard_sigmoid_grad")
def hard_sigmoid_grad(Out, dOut, slope):
    return _pointwise(formulas.hard_sigmoid_grad, Out, dOut, slope)


@cuda_kernel("hard_swish_grad")
def hard_swish_grad(X, dOut, threshold, scale, offset):
    return _pointwise(formulas.hard_swish_grad, X, dOut, threshold, scale, offset)


@cuda_kernel("swish_grad")
def swish_grad(X, dOut):
    return _pointwise(formulas.swish_grad, X, dOut)


@cuda_kernel("mish_grad")
def mish_grad(X, dOut, threshold):
    return _pointwise(formulas.mish_grad, X, dOut, threshold)


@cuda_kernel("selu_grad")
def selu_grad(Out, dOut, scale, alpha):
    return _pointwise(formulas.selu_grad, Out, dOut, scale, alpha)
