"""Shape geometry that shape rules (tape/ops) and kernels both compute: convolution and pooling
paddings and output sides, pooling windows, Paddle's elementwise broadcast alignment,
unsqueeze's inserted axes.

It lives in the core, apart from the op definitions, so that a kernel and its op's shape rule
agree by construction while kernels import nothing from ``tape.ops``. Pure functions of shapes
and attribute values (-1 = an unknown side where noted).
"""
from __future__ import annotations

import numpy as np


def resolve_paddings(in_hw, ksize, strides, paddings, dilations, algorithm):
    """Paddle's UpdatePaddingAndDilation: ``((top, bottom, left, right), (dh, dw))``.

    ``paddings`` has 2 entries (the same on both sides) or 4. "VALID" pads nothing; "SAME" pads
    so that the output has ``ceil(in / stride)`` cells, the odd cell at the bottom/right, and
    (as Paddle does) resets the dilations to 1. A pad that depends on an unknown (-1) input side
    is -1.
    """
    if len(paddings) == 2:
        paddings = (paddings[0], paddings[0], paddings[1], paddings[1])
    if algorithm == "VALID":
        return (0, 0, 0, 0), tuple(dilations)
    if algorithm != "SAME":
        return tuple(paddings), tuple(dilations)
    pads = []
    for size, k, s in zip(in_hw, ksize, strides):
        if size < 0:
            pads += [-1, -1]
            continue
        total = max((-(-size // s) - 1) * s + k - size, 0)
        pads += [total // 2, total - total // 2]
    return tuple(pads), (1, 1)


def conv_geometry(x_shape, w_shape, strides, paddings, dilations, algorithm):
    """``(pads, (dh, dw), out_h, out_w)`` of a convolution of an NCHW input by a filter of
    ``w_shape``, for kernels (known sizes only): the padding rule above, then the output size."""
    (height, width), (kh, kw) = x_shape[2:], w_shape[2:]
    pads, (dh, dw) = resolve_paddings((height, width), (kh, kw), strides, paddings, dilations,
                                      algorithm)
    out_h = (height + pads[0] + pads[1] - dh * (kh - 1) - 1) // strides[0] + 1
    out_w = (width + pads[2] + pads[3] - dw * (kw - 1) - 1) // strides[1] + 1
    return pads, (dh, dw), out_h, out_w


def pool_geometry(in_hw, ksize, strides, paddings, algorithm, global_pooling, adaptive,
                  ceil_mode):
    """``(ksize, (top, bottom, left, right), (out_h, out_w))`` as Paddle's pool2d computes them.

    Global pooling takes the whole image as the window (one output cell, even for an unknown
    side); global and adaptive pooling pad nothing; adaptive pooling has ``ksize`` as its output
    sides. An output side is -1 where an input side is unknown, and 0 or less where the window
    does not fit (the shape rule rejects it).
    """
    if global_pooling:
        ksize = tuple(in_hw)
    if adaptive:
        return tuple(ksize), (0, 0, 0, 0), tuple(ksize)
    if global_pooling:
        return ksize, (0, 0, 0, 0), (1, 1)
    pads, _ = resolve_paddings(in_hw, ksize, strides, paddings, (1, 1), algorithm)
    out = []
    for size, k, s, pad0, pad1 in zip(in_hw, ksize, strides, pads[::2], pads[1::2]):
        if size < 0 or pad0 < 0:
            out.append(-1)
        else:
            out.append((size + pad0 + pad1 - k + (s - 1 if ceil_mode else 0)) // s + 1)
    return tuple(ksize), pads, tuple(out)


def align_shapes(x_shape, y_shape, axis: int):
    """Paddle's elementwise alignment: the shorter shape is placed at ``axis`` of the longer
    (``axis=-1``: at the end) and padded with 1s. Returns both padded shapes, or None when
    ``axis`` cannot place it."""
    swap = len(y_shape) > len(x_shape)
    long, short = (y_shape, x_shape) if swap else (x_shape, y_shape)
    start = len(long) - len(short) if axis == -1 else axis
    if not 0 <= start <= len(long) - len(short):
        return None
    padded = (1,) * start + tuple(short) + (1,) * (len(long) - len(short) - start)
    return (padded, tuple(long)) if swap else (tuple(long), padded)


def unsqueezed(shape, axes):
    """``shape`` with a 1 inserted at each of ``axes`` in turn, a negative axis counting from the
    end of the shape grown so far (``-1`` appends); None when an axis falls outside it."""
    out = list(shape)
    for axis in axes:
        rank = len(out)
        if not -rank - 1 <= axis <= rank:
            return None
        out.insert(axis + rank + 1 if axis < 0 else axis, 1)
    return out


def pool_windows(size, out, k, stride, pad, adaptive):
    """Per output cell along one axis: window start and end on the image, and the window length
    Paddle divides by when not exclusive (clipped only to size + pad). Read-only arrays."""
    idx = np.arange(out)
    if adaptive:
        start, end = idx * size // out, -(-(idx + 1) * size // out)
        bounds = (start, end, end - start)
    else:
        start = idx * stride - pad
        end = np.minimum(start + k, size + pad)
        bounds = (np.maximum(start, 0), np.minimum(end, size), end - start)
    for b in bounds:
        b.flags.writeable = False
    return bounds


def pool_areas(rows, cols, exclusive, adaptive):
    """What each output cell's mean divides by (float64; the loops cast)."""
    (h0, h1, h_full), (w0, w1, w_full) = rows, cols
    if exclusive or adaptive:
        return np.outer(h1 - h0, w1 - w0).astype(np.float64)
    return np.outer(h_full, w_full).astype(np.float64)
