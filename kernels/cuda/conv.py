"""The convolutions (conv2d, depthwise_conv2d and their transposes) and their gradients on the
GPU: im2col / col2im in numba.cuda around cuBLAS GEMMs.

The kernels are the CPU ones with the device array module (so its grouped matmuls run on
cuBLAS through cupy) and with their own column helpers. The column matrix is the CPU side's,
(C * kh * kw, N, H_out * W_out), but no tap table is built: each thread computes where its tap
reads, as arithmetic is cheaper than memory on a GPU, and col2im gathers, for each input cell,
the taps that read it, so no two threads write one cell and no atomics are needed.
"""
import functools
from typing import NamedTuple

from numba import cuda

from tape.geometry import conv_geometry, conv_transpose_geometry

from ..cpu import conv as cpu
from .device import array_module, cuda_kernel, launch, on_device, on_device_using


class _Geometry(NamedTuple):
    """What a tap reads, by arithmetic: kernel size, strides, dilations, top/left padding and
    output size. It stands in for the CPU side's tap table, whose ``shape`` it has."""

    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    top: int
    left: int
    out_h: int
    out_w: int

    @property
    def shape(self):
        return self.kh * self.kw, self.out_h * self.out_w


@functools.lru_cache(maxsize=256)
def _plan(x_shape, w_shape, strides, paddings, dilations, padding_algorithm):
    """``(geometry, out_h, out_w)`` of a convolution (Paddle's padding rules, as the shape
    rule): the CPU ``_plan`` with a _Geometry for the tap table."""
    kh, kw = w_shape[2:]
    pads, (dh, dw), out_h, out_w = conv_geometry(x_shape, w_shape, strides, paddings,
                                                 dilations, padding_algorithm)
    geometry = _Geometry(kh, kw, strides[0], strides[1], dh, dw, pads[0], pads[2], out_h, out_w)
    return geometry, out_h, out_w


@cuda.jit
def _im2col_kernel(x, kh, kw, sh, sw, dh, dw, top, left, out_h, out_w, cols):
    """cols[c * kh * kw + t, n, p] = x[n, c] at tap t of output cell p, 0 in the padding."""
    batch, height, width = x.shape[0], x.shape[2], x.shape[3]
    plane = cols.shape[2]
    taps = kh * kw
    for e in range(cuda.grid(1), cols.size, cuda.gridsize(1)):
        p = e % plane
        n = (e // plane) % batch
        row = e // (plane * batch)
        c, t = row // taps, row % taps
        r = (p // out_w) * sh - top + (t // kw) * dh
        q = (p % out_w) * sw - left + (t % kw) * dw
        inside = 0 <= r < height and 0 <= q < width
        cols[row, n, p] = x[n, c, r, q] if inside else 0.0


@cuda.jit
def _col2im_kernel(cols, kh, kw, sh, sw, dh, dw, top, left, out_h, out_w, dx):
    """The adjoint of _im2col_kernel: dx[n, c, r, q] = the sum of the columns of the taps that
    read it."""
    batch, channels, height, width = dx.shape
    for e in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        q = e % width
        r = (e // width) % height
        c = (e // (width * height)) % channels
        n = e // (width * height * channels)
        total = 0.0
        for ki in range(kh):
            y = r + top - ki * dh          # = oy * sh for the output row oy reading r
            if y < 0 or y % sh != 0 or y // sh >= out_h:
                continue
            for kj in range(kw):
                z = q + left - kj * dw     # = ox * sw for the output column ox reading q
                if z < 0 or z % sw != 0 or z // sw >= out_w:
                    continue
                total += cols[(c * kh + ki) * kw + kj, n, (y // sh) * out_w + z // sw]
        dx[n, c, r, q] = total


def _columns(x, geometry):
    """im2col of ``x`` as a 2-D (C * kh * kw, N * P) array."""
    xp = array_module(x)
    cols = xp.empty((x.shape[1] * geometry.shape[0], x.shape[0], geometry.shape[1]), x.dtype)
    launch(_im2col_kernel, cols.size, xp.ascontiguousarray(x), *geometry, cols)
    return cols.reshape(cols.shape[0], -1)


def _col2im(cols, geometry, dx):
    launch(_col2im_kernel, dx.size, cols, *geometry, dx)


@functools.lru_cache(maxsize=256)
def _transpose_plan(x_shape, w_shape, strides, paddings, dilations, padding_algorithm,
                    output_size, output_padding):
    """The CPU ``_transpose_plan`` with a _Geometry for the tap table."""
    (height, width), (kh, kw) = x_shape[2:], w_shape[2:]
    pads, (dh, dw), (out_h, out_w), _ = conv_transpose_geometry(
        (height, width), (kh, kw), strides, paddings, dilations, padding_algorithm, output_size,
        output_padding)
    geometry = _Geometry(kh, kw, strides[0], strides[1], dh, dw, pads[0], pads[2], height, width)
    return geometry, out_h, out_w


_matmul_groups = on_device(cpu._matmul_groups)
_products = {
    "_convolve": on_device(cpu._convolve, _columns=_columns, _matmul_groups=_matmul_groups),
    "_input_grad": on_device(cpu._input_grad, _col2im=_col2im, _matmul_groups=_matmul_groups),
    "_filter_grad": on_device(cpu._filter_grad, _columns=_columns,
                              _matmul_groups=_matmul_groups),
    "_channels_first": on_device(cpu._channels_first),
    "_in_layout": on_device(cpu._in_layout),
}


def _on_device(fn, plan):
    """A CPU convolution kernel with the device's plan and products."""
    return on_device_using(fn, {**_products, plan.__name__: plan})


for _op in ("conv2d", "depthwise_conv2d"):
    cuda_kernel(_op)(_on_device(cpu.conv2d, _plan))
    cuda_kernel(_op + "_grad")(_on_device(cpu.conv2d_grad, _plan))
for _op in ("conv2d_transpose", "depthwise_conv2d_transpose"):
    cuda_kernel(_op)(_on_device(cpu.conv2d_transpose, _transpose_plan))
    cuda_kernel(_op + "_grad")(_on_device(cpu.conv2d_transpose_grad, _transpose_plan))
