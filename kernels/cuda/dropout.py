"""dropout and its gradient on the GPU: one fused masked-scale pass each.

The kernels are the CPU ones with the device array module and a numba.cuda launch in place of
the numba loop. The uniform draw is the CPU one, made on the host and copied to the device: a
seed gives the same mask on every place.
"""
from .. import formulas
from ..cpu import dropout as cpu
from .device import cuda_kernel, launch, on_device, pointwise, to_device


def _masked_scale(values, keep, out, scalars):
    launch(pointwise(formulas.masked_scale), out.size, values, keep, out, scalars)


class _DrawsToDevice:
    """A numpy Generator whose ``random`` draws land on the device."""

    def __init__(self, generator):
        self._generator = generator

    def random(self, shape, dtype):
        return to_device(self._generator.random(shape, dtype=dtype))


def _rng(Seed, fix_seed, seed):
    return _DrawsToDevice(cpu._rng(Seed, fix_seed, seed))


_apply = on_device(cpu._apply, _masked_scale=_masked_scale)
cuda_kernel("dropout")(on_device(cpu.dropout, _rng=_rng, _apply=_apply))
cuda_kernel("dropout_grad")(on_device(cpu.dropout_grad, _apply=_apply))
