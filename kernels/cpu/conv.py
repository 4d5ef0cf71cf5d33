"""conv2d, depthwise_conv2d, conv2d_transpose, depthwise_conv2d_transpose and their gradients:
im2col / col2im in numba around BLAS GEMMs.

A transposed convolution is the adjoint of a convolution, so the three products of a convolution
(``_convolve``, ``_input_grad``, ``_filter_grad``) serve both: its forward is a convolution's
input gradient, and its gradients are a convolution and a convolution's filter gradient, all on
the tap table of the convolution that maps Output-sized images to Input-sized ones.

The column matrix is (C * kh * kw, N, H_out * W_out): a row per (channel, kernel tap), so a
group's rows are one contiguous block and ``W (M, C * kh * kw) @ columns`` is one GEMM per
group. Where each tap of each output cell reads is precomputed once per geometry (``_taps``),
so the loops neither pad the input nor test bounds per element. On the two 3x3 convolutions of
benchmarks/cnn.py (batch 128, 8x8 and 4x4 images, C = 1 and 16), a direct numba convolution (no
columns, no GEMM) took 0.38 and 5.2 ms against 0.08 and 0.29 ms for im2col + GEMM: BLAS wins
even on images this small, so there is no direct path.

The loops index with unsigned offsets on purpose: numba wraps negative signed indices around
(a select per access), which keeps LLVM from vectorising; these loops ran 4x slower with signed
offsets.
"""
import functools

import numpy as np

from tape.geometry import conv_geometry, conv_transpose_geometry
from tape.registry import kernel

from ..jit import njit

_OUTSIDE = np.uint64(np.iinfo(np.uint64).max)   # a tap that lands in the zero padding


@functools.lru_cache(maxsize=256)
def _taps(height, width, kh, kw, sh, sw, dh, dw, top, left, out_h, out_w):
    """(kh * kw, out_h * out_w) uint64: the offset in an (H, W) image that each kernel tap of
    each output cell reads, or _OUTSIDE where it reads the padding."""
    rows = np.arange(kh)[:, None, None, None] * dh + np.arange(out_h)[None, None, :, None] * sh
    cols = np.arange(kw)[None, :, None, None] * dw + np.arange(out_w)[None, None, None, :] * sw
    rows, cols = rows - top, cols - left
    inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    # -1 reinterpreted as uint64 is _OUTSIDE
    offsets = np.where(inside, rows * width + cols, -1).astype(np.int64).view(np.uint64)
    offsets.flags.writeable = False
    return offsets.reshape(kh * kw, out_h * out_w)


@functools.lru_cache(maxsize=256)
def _plan(x_shape, w_shape, strides, paddings, dilations, padding_algorithm):
    """``(taps, out_h, out_w)`` of a convolution (Paddle's padding rules, as the shape rule)."""
    (height, width), (kh, kw) = x_shape[2:], w_shape[2:]
    pads, (dh, dw), out_h, out_w = conv_geometry(x_shape, w_shape, strides, paddings,
                                                 dilations, padding_algorithm)
    return (_taps(height, width, kh, kw, strides[0], strides[1], dh, dw, pads[0], pads[2],
                  out_h, out_w), out_h, out_w)


@njit
def _im2col(x, taps, cols):
    """cols[c * T + t, n, p] = x[n, c].flat[taps[t, p]], 0 where the tap is outside."""
    batch, channels = x.shape[0], x.shape[1]
    image = x.shape[2] * x.shape[3]
    flat = x.reshape(-1)
    count, plane = taps.shape
    for c in range(channels):
        for t in range(count):
            row = c * count + t
            for n in range(batch):
                base = np.uint64((n * channels + c) * image)
                for p in range(plane):
                    offset = taps[t, p]
                    cols[row, n, p] = flat[base + offset] if offset != _OUTSIDE else 0.0


@njit
def _col2im(cols, taps, dx):
    """The adjoint of _im2col: dx[n, c].flat[taps[t, p]] += cols[c * T + t, n, p]."""
    batch, channels = dx.shape[0], dx.shape[1]
    image = dx.shape[2] * dx.shape[3]
    flat = dx.reshape(-1)
    flat[:] = 0.0
    count, plane = taps.shape
    for c in range(channels):
        for t in range(count):
            row = c * count + t
            for n in range(batch):
                base = np.uint64((n * channels + c) * image)
                for p in range(plane):
                    offset = taps[t, p]
                    if offset != _OUTSIDE:
                        flat[base + offset] += cols[row, n, p]


def _columns(x, taps):
    """im2col of ``x`` as a 2-D (C * T, N * P) array."""
    cols = np.empty((x.shape[1] * taps.shape[0], x.shape[0], taps.shape[1]), x.dtype)
    _im2col(np.ascontiguousarray(x), taps, cols)
    return cols.reshape(cols.shape[0], -1)


def _group_blocks(matrix, groups):
    """The ``groups`` equal row blocks of a 2-D array (views)."""
    step = matrix.shape[0] // groups
    return [matrix[g * step:(g + 1) * step] for g in range(groups)]


def _matmul_groups(groups, out, a, b, transpose_a=False, transpose_b=False):
    """For each of the ``groups`` row blocks of ``a``, ``b`` and ``out``:
    ``out_g = a_g @ b_g``, an operand transposed when asked. One GEMM per group."""
    for a_g, b_g, out_g in zip(_group_blocks(a, groups), _group_blocks(b, groups),
                               _group_blocks(out, groups)):
        np.matmul(a_g.T if transpose_a else a_g, b_g.T if transpose_b else b_g, out=out_g)
    return out


@functools.lru_cache(maxsize=256)
def _transpose_plan(x_shape, w_shape, strides, paddings, dilations, padding_algorithm,
                    output_size, output_padding):
    """``(taps, out_h, out_w)`` of a transposed convolution: the tap table of the convolution
    from its (out_h, out_w) Output to its Input's sides."""
    (height, width), (kh, kw) = x_shape[2:], w_shape[2:]
    pads, (dh, dw), (out_h, out_w), _ = conv_transpose_geometry(
        (height, width), (kh, kw), strides, paddings, dilations, padding_algorithm, output_size,
        output_padding)
    return (_taps(out_h, out_w, kh, kw, strides[0], strides[1], dh, dw, pads[0], pads[2],
                  height, width), out_h, out_w)


def _channels_first(a):
    """(N, M, ...) -> the (M, N * P) layout of a convolution GEMM's output."""
    batch, channels = a.shape[:2]
    return np.ascontiguousarray(a.reshape(batch, channels, -1).transpose(1, 0, 2)).reshape(
        channels, -1)


def _convolve(images, weights, taps, groups, out_hw):
    """The convolution of (N, C, H, W) ``images`` by ``weights`` (M, C/groups * T): (N, M,
    out_h, out_w)."""
    batch, out_channels = images.shape[0], weights.shape[0]
    cols = _columns(images, taps)
    out = _matmul_groups(groups, np.empty((out_channels, cols.shape[1]), images.dtype), weights,
                         cols)
    # (M, N, P) -> (N, M, P): the one copy that puts the result in NCHW order
    out = np.ascontiguousarray(out.reshape(out_channels, batch, -1).transpose(1, 0, 2))
    return out.reshape((batch, out_channels) + tuple(out_hw))


def _input_grad(weights, dout, taps, groups, image_shape):
    """The gradient of a convolution with respect to its ``image_shape`` images: col2im of
    ``weights.T @ dout`` (``dout`` in the (M, N * P) layout)."""
    d_cols = np.empty((image_shape[1] * taps.shape[0], dout.shape[1]), dout.dtype)
    _matmul_groups(groups, d_cols, weights, dout, transpose_a=True)
    d_input = np.empty(image_shape, dout.dtype)
    _col2im(d_cols.reshape(d_cols.shape[0], image_shape[0], -1), taps, d_input)
    return d_input


def _filter_grad(images, dout, taps, groups, filter_shape):
    """The gradient of a convolution of ``images`` with respect to its filter: ``dout`` (M,
    N * P) @ the columns of ``images``."""
    out_channels, group_channels, kh, kw = filter_shape
    d_filter = np.empty((out_channels, group_channels * kh * kw), dout.dtype)
    return _matmul_groups(groups, d_filter, dout, _columns(images, taps),
                          transpose_b=True).reshape(filter_shape)


def _nchw(a, data_format):
    """An NHWC image batch as an NCHW view (NCHW and AnyLayout as they are)."""
    return a.transpose(0, 3, 1, 2) if data_format == "NHWC" else a


def _in_layout(a, data_format):
    """An NCHW result in the op's data_format (contiguous)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if data_format == "NHWC" else a


@kernel("conv2d")
@kernel("depthwise_conv2d")
def conv2d(Input, Filter, strides, paddings, dilations, groups, padding_algorithm,
           data_format):
    x = _nchw(Input, data_format)
    taps, out_h, out_w = _plan(x.shape, Filter.shape, strides, paddings, dilations,
                               padding_algorithm)
    out = _convolve(x, Filter.reshape(Filter.shape[0], -1), taps, groups, (out_h, out_w))
    return _in_layout(out, data_format)


@kernel("conv2d_grad")
@kernel("depthwise_conv2d_grad")
def conv2d_grad(Input, Filter, dOutput, strides, paddings, dilations, groups,
                padding_algorithm, data_format, wants):
    x = _nchw(Input, data_format)
    taps, _, _ = _plan(x.shape, Filter.shape, strides, paddings, dilations, padding_algorithm)
    dout = _channels_first(_nchw(dOutput, data_format))
    d_input = d_filter = None
    if "Filter@GRAD" in wants:
        d_filter = _filter_grad(x, dout, taps, groups, Filter.shape)
    if "Input@GRAD" in wants:
        d_input = _in_layout(_input_grad(Filter.reshape(Filter.shape[0], -1), dout, taps,
                                         groups, x.shape), data_format)
    return d_input, d_filter


@kernel("conv2d_transpose")
@kernel("depthwise_conv2d_transpose")
def conv2d_transpose(Input, Filter, strides, paddings, dilations, groups, padding_algorithm,
                     output_size, output_padding, data_format):
    x = _nchw(Input, data_format)
    taps, out_h, out_w = _transpose_plan(x.shape, Filter.shape, strides, paddings, dilations,
                                         padding_algorithm, output_size, output_padding)
    image_shape = (x.shape[0], Filter.shape[1] * groups, out_h, out_w)
    out = _input_grad(Filter.reshape(Filter.shape[0], -1), _channels_first(x), taps, groups,
                      image_shape)
    return _in_layout(out, data_format)


@kernel("conv2d_transpose_grad")
@kernel("depthwise_conv2d_transpose_grad")
def conv2d_transpose_grad(Input, Filter, dOutput, strides, paddings, dilations, groups,
                          padding_algorithm, output_size, output_padding, data_format, wants):
    x, dout = _nchw(Input, data_format), _nchw(dOutput, data_format)
    taps, _, _ = _transpose_plan(x.shape, Filter.shape, strides, paddings, dilations,
                                 padding_algorithm, output_size, output_padding)
    d_input = d_filter = None
    if "Input@GRAD" in wants:
        d_input = _in_layout(_convolve(dout, Filter.reshape(Filter.shape[0], -1), taps, groups,
                                       x.shape[2:]), data_format)
    if "Filter@GRAD" in wants:
        d_filter = _filter_grad(dout, _channels_first(x), taps, groups, Filter.shape)
    return d_input, d_filter
