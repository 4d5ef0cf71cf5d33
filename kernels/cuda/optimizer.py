"""sgd, momentum, adam, adamw on the GPU: each one fused in-place numba.cuda pass.

The kernels are the CPU ones with device-side flattening and write-back and numba.cuda launches,
of the same signatures, in place of their numba loops: the scalar algebra (bias corrections,
decay, the dtype it runs in) is written once, and so is each element's update
(kernels/formulas.py). The scalars (learning rate, beta powers) are read to the host, as on the
CPU, so the arithmetic runs in the same dtype.
"""
from numba import cuda

from .. import formulas
from ..cpu import optimizer as cpu
from .device import array_module, cuda_kernel, device_function, launch, on_device, with_globals

_sgd = device_function(formulas.sgd)
_momentum = device_function(formulas.momentum)
_adam = device_function(formulas.adam)


@cuda.jit
def _sgd_kernel(param, grad, lr):
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        param[i] = _sgd(param[i], grad[i], lr)


@cuda.jit
def _momentum_kernel(param, grad, velocity, lr, mu, l2, rescale, nesterov):
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        param[i], velocity[i] = _momentum(param[i], grad[i], velocity[i], lr, mu, l2, rescale,
                                          nesterov)


@cuda.jit
def _adam_kernel(param, grad, moment1, moment2, moment2_max, beta1, rest1, beta2, rest2, lr_t,
                 eps_t, keep, amsgrad):
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        # without amsgrad moment2_max is empty, and the formula reads no maximum
        top = moment2_max[i] if amsgrad else moment2[i]
        param[i], moment1[i], moment2[i], top = _adam(
            param[i], grad[i], moment1[i], moment2[i], top, beta1, rest1, beta2, rest2, lr_t,
            eps_t, keep, amsgrad)
        if amsgrad:
            moment2_max[i] = top


def _sgd_fused(param, grad, lr):
    launch(_sgd_kernel, param.size, param.reshape(-1), grad.reshape(-1), lr)


def _momentum_fused(param, grad, velocity, lr, mu, l2, rescale, nesterov):
    launch(_momentum_kernel, param.size, param, grad, velocity, lr, mu, l2, rescale, nesterov)


def _adam_fused(param, grad, moment1, moment2, moment2_max, beta1, rest1, beta2, rest2, lr_t,
                eps_t, keep, amsgrad):
    if not amsgrad:   # the CPU passes an empty host array: the kernel takes a device one
        moment2_max = array_module(param).empty(0, param.dtype)
    launch(_adam_kernel, param.size, param, grad, moment1, moment2, moment2_max, beta1, rest1,
           beta2, rest2, lr_t, eps_t, keep, amsgrad)


_state = {"_flat": on_device(cpu._flat), "_write_back": on_device(cpu._write_back)}
cuda_kernel("sgd")(with_globals(cpu.sgd, _sgd_fused=_sgd_fused, **_state))
cuda_kernel("momentum")(with_globals(cpu.momentum, _momentum_fused=_momentum_fused, **_state))
# numpy stays numpy in the adam step: it computes the host scalars
_adam_update = with_globals(cpu._adam_update, _adam_fused=_adam_fused, **_state)
cuda_kernel("adam")(with_globals(cpu.adam, _adam_update=_adam_update))
cuda_kernel("adamw")(with_globals(cpu.adamw, _adam_update=_adam_update))


# ---- adagrad, rmsprop, adadelta, adamax, lamb: the CPU's steps, in a numba.cuda loop ----

_compiled_kernels: dict = {}


def _each_element(step):
    """``fused(param, grad, a, b, c, k)``: a launch of a numba.cuda kernel running the CPU's
    ``step`` (compiled as a device function) on every element."""
    kernel = _compiled_kernels.get(step)
    if kernel is None:
        element = cuda.jit(device=True)(step)

        @cuda.jit
        def kernel(param, grad, a, b, c, k):
            for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
                element(i, param, grad, a, b, c, k)
        _compiled_kernels[step] = kernel
    return lambda param, *args: launch(kernel, param.size, param, *args)


_apply = on_device(cpu._apply, _each_element=_each_element, _flat=_state["_flat"],
                   _write_back=_state["_write_back"])
for _op in ("adagrad", "rmsprop", "adadelta", "adamax"):
    cuda_kernel(_op)(with_globals(getattr(cpu, _op), _apply=_apply))
cuda_kernel("lamb")(on_device(cpu.lamb, _apply=_apply))
