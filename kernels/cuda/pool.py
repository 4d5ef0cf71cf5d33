"""pool2d and its gradient on the GPU: one thread per output cell.

2x2 windows that tile an even image have their own kernels (no bounds, and their gradients
write each input cell once). Every other geometry reads the CPU side's per-axis window bounds
(one rule for explicit, SAME/VALID, ceil-mode, global and adaptive windows), copied to the
device once per geometry; as windows may overlap, their gradients scatter-add with atomics.
"""
import functools

from numba import cuda

from tape.geometry import pool_areas

from .. import formulas
from ..cpu.pool import _windows
from .device import array_module, cuda_kernel, device_function, launch

_window_max = device_function(formulas.window_max)
_window_argmax = device_function(formulas.window_argmax)
_window_sum = device_function(formulas.window_sum)
_max_of_four = device_function(formulas.max_of_four)
_mean_of_four = device_function(formulas.mean_of_four)


@cuda.jit
def _max_pool(x, h0, h1, w0, w1, out):
    batch, channels, out_h, out_w = out.shape
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        ox, y = e % out_w, (e // out_w) % out_h
        n, c = e // (out_w * out_h * channels), (e // (out_w * out_h)) % channels
        out[n, c, y, ox] = _window_max(x, n, c, h0[y], h1[y], w0[ox], w1[ox])


@cuda.jit
def _max_pool_grad(x, out, dout, h0, h1, w0, w1, dx):
    """dout of each cell goes to the first cell of its window that holds the maximum."""
    batch, channels, out_h, out_w = out.shape
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        ox, y = e % out_w, (e // out_w) % out_h
        n, c = e // (out_w * out_h * channels), (e // (out_w * out_h)) % channels
        r, q = _window_argmax(x, n, c, h0[y], h1[y], w0[ox], w1[ox], out[n, c, y, ox])
        if r >= 0:
            cuda.atomic.add(dx, (n, c, r, q), dout[n, c, y, ox])


@cuda.jit
def _avg_pool(x, h0, h1, w0, w1, area, out):
    batch, channels, out_h, out_w = out.shape
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        ox, y = e % out_w, (e // out_w) % out_h
        n, c = e // (out_w * out_h * channels), (e // (out_w * out_h)) % channels
        out[n, c, y, ox] = _window_sum(x, n, c, h0[y], h1[y], w0[ox], w1[ox]) / area[y, ox]


@cuda.jit
def _avg_pool_grad(dout, h0, h1, w0, w1, area, dx):
    batch, channels, out_h, out_w = dout.shape
    for e in range(cuda.grid(1), dout.size, cuda.gridsize(1)):
        ox, y = e % out_w, (e // out_w) % out_h
        n, c = e // (out_w * out_h * channels), (e // (out_w * out_h)) % channels
        share = dout[n, c, y, ox] / area[y, ox]
        for r in range(h0[y], h1[y]):
            for q in range(w0[ox], w1[ox]):
                cuda.atomic.add(dx, (n, c, r, q), share)


# ---- 2x2 windows tiling the image, on flat arrays: output row k reads input rows 2k, 2k + 1 ----

@cuda.jit
def _max_pool_2x2(x, out, out_w):
    width = 2 * out_w
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i = 2 * (e // out_w) * width + 2 * (e % out_w)     # the window's top-left cell
        out[e] = _max_of_four(x[i], x[i + 1], x[i + width], x[i + width + 1])


@cuda.jit
def _max_pool_2x2_grad(x, out, dout, out_w, dx):
    width = 2 * out_w
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i = 2 * (e // out_w) * width + 2 * (e % out_w)
        top = out[e]
        # the first cell (row-major) holding the maximum gets the gradient
        first = i if x[i] == top else i + 1 if x[i + 1] == top else \
            i + width if x[i + width] == top else i + width + 1
        dx[i] = 0.0
        dx[i + 1] = 0.0
        dx[i + width] = 0.0
        dx[i + width + 1] = 0.0
        dx[first] = dout[e]


@cuda.jit
def _avg_pool_2x2(x, out, out_w):
    width = 2 * out_w
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i = 2 * (e // out_w) * width + 2 * (e % out_w)
        out[e] = _mean_of_four(x[i], x[i + 1], x[i + width], x[i + width + 1])


@cuda.jit
def _avg_pool_2x2_grad(dout, out_w, dx):
    width = 2 * out_w
    for e in range(cuda.grid(1), dout.size, cuda.gridsize(1)):
        i = 2 * (e // out_w) * width + 2 * (e % out_w)
        share = dout[e] * 0.25
        dx[i] = share
        dx[i + 1] = share
        dx[i + width] = share
        dx[i + width + 1] = share


@functools.lru_cache(maxsize=256)
def _device_windows(xp, device, shape, ksize, strides, paddings, global_pooling, adaptive,
                    ceil_mode, padding_algorithm, exclusive):
    """``(h0, h1, w0, w1, area)`` of the CPU side's windows as device arrays on ``device``, or
    None for 2x2 windows tiling the image."""
    windows = _windows(shape, ksize, strides, paddings, global_pooling, adaptive, ceil_mode,
                       padding_algorithm)
    if windows is None:
        return None
    rows, cols = windows
    return tuple(xp.array(a) for a in (rows[0], rows[1], cols[0], cols[1],
                                       pool_areas(rows, cols, exclusive, adaptive)))


def _windows_on(xp, X, ksize, strides, paddings, global_pooling, adaptive, ceil_mode,
                padding_algorithm, exclusive):
    device = xp.cuda.Device().id if hasattr(xp, "cuda") else None
    return _device_windows(xp, device, X.shape, ksize, strides, paddings, global_pooling,
                           adaptive, ceil_mode, padding_algorithm, exclusive)


@cuda_kernel("pool2d")
def pool2d(X, ksize, strides, paddings, pooling_type, global_pooling, exclusive, adaptive,
           ceil_mode, padding_algorithm):
    xp = array_module(X)
    windows = _windows_on(xp, X, ksize, strides, paddings, global_pooling, adaptive, ceil_mode,
                          padding_algorithm, exclusive)
    x = xp.ascontiguousarray(X)
    if windows is None:
        out = xp.empty(X.shape[:2] + (X.shape[2] // 2, X.shape[3] // 2), X.dtype)
        launch(_max_pool_2x2 if pooling_type == "max" else _avg_pool_2x2, out.size,
               x.reshape(-1), out.reshape(-1), out.shape[3])
        return out
    h0, h1, w0, w1, area = windows
    out = xp.empty(X.shape[:2] + (h0.size, w0.size), X.dtype)
    if pooling_type == "max":
        launch(_max_pool, out.size, x, h0, h1, w0, w1, out)
    else:
        launch(_avg_pool, out.size, x, h0, h1, w0, w1, area, out)
    return out


@cuda_kernel("pool2d_grad")
def pool2d_grad(X, Out, dOut, ksize, strides, paddings, pooling_type, global_pooling,
                exclusive, adaptive, ceil_mode, padding_algorithm):
    xp = array_module(X, Out, dOut)
    windows = _windows_on(xp, X, ksize, strides, paddings, global_pooling, adaptive, ceil_mode,
                          padding_algorithm, exclusive)
    dout = xp.ascontiguousarray(dOut)
    if windows is None:
        dx = xp.empty(X.shape, X.dtype)
        if pooling_type == "max":
            launch(_max_pool_2x2_grad, dout.size, xp.ascontiguousarray(X).reshape(-1),
                   xp.ascontiguousarray(Out).reshape(-1), dout.reshape(-1), dout.shape[3],
                   dx.reshape(-1))
        else:
            launch(_avg_pool_2x2_grad, dout.size, dout.reshape(-1), dout.shape[3],
                   dx.reshape(-1))
        return dx
    h0, h1, w0, w1, area = windows
    dx = xp.zeros(X.shape, X.dtype)
    if pooling_type == "max":
        launch(_max_pool_grad, dout.size, xp.ascontiguousarray(X), xp.ascontiguousarray(Out),
               dout, h0, h1, w0, w1, dx)
    else:
        launch(_avg_pool_grad, dout.size, dout, h0, h1, w0, w1, area, dx)
    return dx
