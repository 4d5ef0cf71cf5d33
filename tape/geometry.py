"""Shape geometry that shape rules (tape/ops) and kernels both compute: convolution (and
transposed convolution) and pooling paddings and output sides, pooling windows, interpolation
output sizes and steps, Paddle's elementwise broadcast alignment, unsqueeze's inserted axes.

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


def conv_transpose_geometry(in_hw, ksize, strides, paddings, dilations, algorithm,
                            output_size, output_padding):
    """``(pads, dilations, out_hw, smallest_hw)`` of a transposed convolution, as Paddle's
    ConvTransposeInferMeta computes them.

    The padding rule is the convolution's, applied to the *input* sides ``in_hw``. Each output
    side is ``(in - 1) * stride - pad_sum + dilation * (k - 1) + 1`` (``smallest_hw``), plus
    ``output_padding`` when given, or ``output_size`` itself when given (which must lie in
    ``[smallest, smallest + stride)``: the shape rule checks). -1 where an input side is unknown.
    """
    pads, dilations = resolve_paddings(in_hw, ksize, strides, paddings, dilations, algorithm)
    out, smallest = [], []
    for i, (size, k, s, d) in enumerate(zip(in_hw, ksize, strides, dilations)):
        pad0, pad1 = pads[2 * i], pads[2 * i + 1]
        low = -1 if size < 0 or k < 0 or pad0 < 0 else \
            (size - 1) * s - pad0 - pad1 + d * (k - 1) + 1
        smallest.append(low)
        if output_size:
            out.append(output_size[i])
        elif low < 0:
            out.append(-1)
        else:
            out.append(low + (output_padding[i] if output_padding else 0))
    return pads, tuple(dilations), tuple(out), tuple(smallest)


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


def interp_output_size(in_hw, out_hw, scale, scale_tensor=None, out_size=None,
                       size_tensor=None):
    """``((out_h, out_w), (scale_h, scale_w))`` of Paddle's 2-D interpolation (interp_v2).

    First of: the SizeTensor values; else OutSize's values; else the sides scaled by the Scale
    tensor's values (one for both sides, or two) or by the ``scale`` attribute (two values; one
    alone is ignored, as in Paddle); else ``out_hw``. Scales are float32 and a scaled side is
    ``int(float32(in) * scale)``, Paddle's arithmetic; a scale is -1 where none applies. Sides
    are -1 where an input side is unknown.
    """
    if size_tensor:
        return (int(size_tensor[0]), int(size_tensor[1])), (-1.0, -1.0)
    scales = (-1.0, -1.0)
    if scale_tensor is not None:
        values = [float(np.float32(v)) for v in scale_tensor]
        scales = (values[0], values[1] if len(values) > 1 else values[0])
    elif len(scale) > 1:
        scales = (float(np.float32(scale[0])), float(np.float32(scale[1])))
    if out_size is not None:
        return (int(out_size[0]), int(out_size[1])), scales
    if scales[0] > 0 and scales[1] > 0:
        out_hw = tuple(-1 if side < 0 else int(np.float32(side) * np.float32(s))
                       for side, s in zip(in_hw, scales))
    return tuple(out_hw), scales


def interp_ratio(in_size: int, out_size: int, scale: float, align_corners: bool) -> np.float32:
    """The float32 step, in input cells per output cell, of Paddle's interpolation along one
    axis: ``(in - 1) / (out - 1)`` with align_corners, else ``1 / scale`` when a scale applies,
    else ``in / out``; 0 for an output of one cell."""
    if out_size <= 1:
        return np.float32(0.0)
    if align_corners:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    if scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size) / np.float32(out_size)


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
