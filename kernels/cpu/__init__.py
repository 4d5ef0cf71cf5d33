"""CPU kernels: numpy where it is optimal, lazily compiled numba where a fused loop pays."""
from . import activation, elementwise, loss, math, optimizer, reduce, tensor  # noqa: F401
