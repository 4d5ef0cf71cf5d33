"""pool2d and its gradient in numba: one pass each.

Window bounds are computed once per geometry along each axis and the loops read them, so one
loop serves explicit, SAME/VALID, ceil-mode, global and adaptive windows. 2x2 windows that tile
an even image (the common case) have their own loops without the bounds.
"""
import functools

import numpy as np

from tape.geometry import pool_areas, pool_geometry, pool_windows
from tape.registry import kernel

from .. import formulas
from ..jit import njit


@functools.lru_cache(maxsize=256)
def _windows(shape, ksize, strides, paddings, global_pooling, adaptive, ceil_mode,
             padding_algorithm):
    """``(rows, cols)``: the ``pool_windows`` of each axis; or None for 2x2 windows that tile
    the image exactly."""
    ksize, pads, (out_h, out_w) = pool_geometry(shape[2:], ksize, strides, paddings,
                                                padding_algorithm, global_pooling, adaptive,
                                                ceil_mode)
    if (ksize == (2, 2) and tuple(strides) == (2, 2) and pads == (0, 0, 0, 0) and not adaptive
            and shape[2] == 2 * out_h and shape[3] == 2 * out_w):
        return None
    return (pool_windows(shape[2], out_h, ksize[0], strides[0], pads[0], adaptive),
            pool_windows(shape[3], out_w, ksize[1], strides[1], pads[2], adaptive))


@njit
def _max_pool(x, h0, h1, w0, w1, out):
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for y in range(h0.size):
                for ox in range(w0.size):
                    out[n, c, y, ox] = formulas.window_max(x, n, c, h0[y], h1[y], w0[ox],
                                                           w1[ox])


@njit
def _max_pool_grad(x, out, dout, h0, h1, w0, w1, dx):
    dx[:] = 0.0
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for y in range(h0.size):
                for ox in range(w0.size):
                    r, q = formulas.window_argmax(x, n, c, h0[y], h1[y], w0[ox], w1[ox],
                                                  out[n, c, y, ox])
                    if r >= 0:
                        dx[n, c, r, q] += dout[n, c, y, ox]


@njit
def _avg_pool(x, h0, h1, w0, w1, area, out):
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for y in range(h0.size):
                for ox in range(w0.size):
                    out[n, c, y, ox] = formulas.window_sum(x, n, c, h0[y], h1[y], w0[ox],
                                                           w1[ox]) / area[y, ox]


@njit
def _avg_pool_grad(dout, h0, h1, w0, w1, area, dx):
    dx[:] = 0.0
    for n in range(dx.shape[0]):
        for c in range(dx.shape[1]):
            for y in range(h0.size):
                for ox in range(w0.size):
                    share = dout[n, c, y, ox] / area[y, ox]
                    for r in range(h0[y], h1[y]):
                        for q in range(w0[ox], w1[ox]):
                            dx[n, c, r, q] += share


# The 2x2 loops walk flat arrays with unsigned offsets: numba wraps negative signed indices
# around (a select per access), which made them 3-4x slower. A window's cells are i, i + 1,
# i + W, i + W + 1 from its top-left offset i.

@njit
def _max_pool_2x2(x, out):
    width, out_w = np.uint64(x.shape[3]), out.shape[3]
    flat, flat_out = x.reshape(-1), out.reshape(-1)
    one = np.uint64(1)
    for row in range(out.size // out_w):      # output rows; each reads two input rows
        top_left = np.uint64(2 * row) * width
        first_out = np.uint64(row * out_w)
        for ox in range(out_w):
            i = top_left + np.uint64(2 * ox)
            flat_out[first_out + np.uint64(ox)] = formulas.max_of_four(
                flat[i], flat[i + one], flat[i + width], flat[i + width + one])


@njit
def _max_pool_2x2_grad(x, out, dout, dx):
    width, out_w = np.uint64(x.shape[3]), out.shape[3]
    flat, flat_out, flat_dout, flat_dx = x.reshape(-1), out.reshape(-1), dout.reshape(-1), \
        dx.reshape(-1)
    one = np.uint64(1)
    for row in range(out.size // out_w):
        top_left = np.uint64(2 * row) * width
        first_out = np.uint64(row * out_w)
        for ox in range(out_w):
            i = top_left + np.uint64(2 * ox)
            top = flat_out[first_out + np.uint64(ox)]
            # which cell is the first maximum (0..3, row-major), without branches: random
            # maxima would make branches mispredict
            k = np.uint64(flat[i] != top) * (one + np.uint64(flat[i + one] != top) * (
                one + np.uint64(flat[i + width] != top)))
            flat_dx[i] = 0.0
            flat_dx[i + one] = 0.0
            flat_dx[i + width] = 0.0
            flat_dx[i + width + one] = 0.0
            flat_dx[i + (k & one) + (k >> one) * width] = flat_dout[first_out + np.uint64(ox)]


@njit
def _avg_pool_2x2(x, out):
    width, out_w = np.uint64(x.shape[3]), out.shape[3]
    flat, flat_out = x.reshape(-1), out.reshape(-1)
    one = np.uint64(1)
    for row in range(out.size // out_w):
        top_left = np.uint64(2 * row) * width
        first_out = np.uint64(row * out_w)
        for ox in range(out_w):
            i = top_left + np.uint64(2 * ox)
            flat_out[first_out + np.uint64(ox)] = formulas.mean_of_four(
                flat[i], flat[i + one], flat[i + width], flat[i + width + one])


@njit
def _avg_pool_2x2_grad(dout, dx):
    width, out_w = np.uint64(dx.shape[3]), dout.shape[3]
    flat_dout, flat_dx = dout.reshape(-1), dx.reshape(-1)
    one = np.uint64(1)
    for row in range(dout.size // out_w):
        top_left = np.uint64(2 * row) * width
        first_out = np.uint64(row * out_w)
        for ox in range(out_w):
            i = top_left + np.uint64(2 * ox)
            share = flat_dout[first_out + np.uint64(ox)] * 0.25
            flat_dx[i] = share
            flat_dx[i + one] = share
            flat_dx[i + width] = share
            flat_dx[i + width + one] = share


@kernel("pool2d")
def pool2d(X, ksize, strides, paddings, pooling_type, global_pooling, exclusive, adaptive,
           ceil_mode, padding_algorithm):
    windows = _windows(X.shape, ksize, strides, paddings, global_pooling, adaptive, ceil_mode,
                       padding_algorithm)
    x = np.ascontiguousarray(X)
    if windows is None:
        out = np.empty(X.shape[:2] + (X.shape[2] // 2, X.shape[3] // 2), X.dtype)
        (_max_pool_2x2 if pooling_type == "max" else _avg_pool_2x2)(x, out)
        return out
    rows, cols = windows
    out = np.empty(X.shape[:2] + (rows[0].size, cols[0].size), X.dtype)
    if pooling_type == "max":
        _max_pool(x, rows[0], rows[1], cols[0], cols[1], out)
    else:
        _avg_pool(x, rows[0], rows[1], cols[0], cols[1],
                  pool_areas(rows, cols, exclusive, adaptive), out)
    return out


@kernel("pool2d_grad")
def pool2d_grad(X, Out, dOut, ksize, strides, paddings, pooling_type, global_pooling,
                exclusive, adaptive, ceil_mode, padding_algorithm):
    windows = _windows(X.shape, ksize, strides, paddings, global_pooling, adaptive, ceil_mode,
                       padding_algorithm)
    dout = np.ascontiguousarray(dOut)
    dx = np.empty(X.shape, X.dtype)
    if windows is None:
        if pooling_type == "max":
            _max_pool_2x2_grad(np.ascontiguousarray(X), np.ascontiguousarray(Out), dout, dx)
        else:
            _avg_pool_2x2_grad(dout, dx)
        return dx
    (h0, h1, _), (w0, w1, _) = rows, cols = windows
    if pooling_type == "max":
        _max_pool_grad(np.ascontiguousarray(X), Out, dout, h0, h1, w0, w1, dx)
    else:
        _avg_pool_grad(dout, h0, h1, w0, w1, pool_areas(rows, cols, exclusive, adaptive), dx)
    return dx
