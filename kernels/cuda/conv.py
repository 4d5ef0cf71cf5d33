"""conv2d and its gradient on the GPU: im2col / col2im in numba.cuda around cuBLAS GEMMs.

The column matrix is the CPU side's, (C * kh * kw, N, H_out * W_out), and the GEMMs are its
grouped matmuls (``np.matmul`` with ``out=`` dispatches to cupy). Each thread computes where its
tap reads instead of reading a precomputed table: arithmetic is cheaper than memory on a GPU.
col2im gathers, for each input cell, the taps that read it, so no two threads write one cell
and no atomics are needed.
"""
from numba import cuda

from tape.ops.conv import resolve_paddings

from ..cpu.conv import _matmul_groups
from .device import array_module, cuda_kernel, launch


def _geometry(x_shape, w_shape, strides, paddings, dilations, padding_algorithm):
    """``(kh, kw, sh, sw, dh, dw, top, left, out_h, out_w)`` (Paddle's padding rules)."""
    height, width = x_shape[2:]
    kh, kw = w_shape[2:]
    pads, (dh, dw) = resolve_paddings((height, width), (kh, kw), strides, paddings, dilations,
                                      padding_algorithm)
    out_h = (height + pads[0] + pads[1] - dh * (kh - 1) - 1) // strides[0] + 1
    out_w = (width + pads[2] + pads[3] - dw * (kw - 1) - 1) // strides[1] + 1
    return kh, kw, strides[0], strides[1], dh, dw, pads[0], pads[2], out_h, out_w


@cuda.jit
def _im2col(x, kh, kw, sh, sw, dh, dw, top, left, out_w, cols):
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
def _col2im(cols, kh, kw, sh, sw, dh, dw, top, left, out_h, out_w, dx):
    """The adjoint of _im2col: dx[n, c, r, q] = the sum of the columns of the taps reading it."""
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
    kh, kw, *_, out_h, out_w = geometry
    cols = xp.empty((x.shape[1] * kh * kw, x.shape[0], out_h * out_w), x.dtype)
    launch(_im2col, cols.size, xp.ascontiguousarray(x), *geometry[:-2], out_w, cols)
    return cols.reshape(cols.shape[0], -1)


@cuda_kernel("conv2d")
def conv2d(Input, Filter, strides, paddings, dilations, groups, padding_algorithm):
    xp = array_module(Input, Filter)
    geometry = _geometry(Input.shape, Filter.shape, strides, paddings, dilations,
                         padding_algorithm)
    batch, out_channels = Input.shape[0], Filter.shape[0]
    cols = _columns(Input, geometry)
    out = _matmul_groups(groups, xp.empty((out_channels, cols.shape[1]), Input.dtype),
                         xp.ascontiguousarray(Filter).reshape(out_channels, -1), cols)
    # (M, N, P) -> (N, M, P): the one copy that puts the result in NCHW order
    out = xp.ascontiguousarray(out.reshape(out_channels, batch, -1).transpose(1, 0, 2))
    return out.reshape(batch, out_channels, *geometry[-2:])


@cuda_kernel("conv2d_grad")
def conv2d_grad(Input, Filter, dOutput, strides, paddings, dilations, groups,
                padding_algorithm, wants):
    xp = array_module(Input, Filter, dOutput)
    geometry = _geometry(Input.shape, Filter.shape, strides, paddings, dilations,
                         padding_algorithm)
    batch, out_channels = Input.shape[0], Filter.shape[0]
    # (N, M, P) -> (M, N * P), the layout of the forward GEMM's output
    dout = xp.ascontiguousarray(dOutput.reshape(batch, out_channels, -1).transpose(1, 0, 2))
    dout = dout.reshape(out_channels, -1)
    weights = xp.ascontiguousarray(Filter).reshape(out_channels, -1)
    d_input = d_filter = None
    if "Filter@GRAD" in wants:
        d_filter = _matmul_groups(groups, xp.empty(weights.shape, Filter.dtype), dout,
                                  _columns(Input, geometry), transpose_b=True)
        d_filter = d_filter.reshape(Filter.shape)
    if "Input@GRAD" in wants:
        taps = geometry[0] * geometry[1]
        d_cols = xp.empty((Input.shape[1] * taps, dout.shape[1]), Input.dtype)
        _matmul_groups(groups, d_cols, weights, dout, transpose_a=True)
        d_input = xp.empty(Input.shape, Input.dtype)
        launch(_col2im, d_input.size, d_cols.reshape(d_cols.shape[0], batch, -1),
               *geometry, d_input)
    return d_input, d_filter

