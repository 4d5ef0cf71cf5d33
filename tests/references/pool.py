"""Reference for pool2d: a Python loop over output cells, each window cut from a padded copy."""
import math

import numpy as np


def _pads(size, k, stride, algorithm, given):
    if algorithm == "VALID":
        return [0, 0]
    if algorithm == "SAME":
        total = max((math.ceil(size / stride) - 1) * stride + k - size, 0)
        return [total // 2, total - total // 2]
    return given


def _window(i, size, out, k, stride, pad, adaptive):
    """``(start, end)`` on the image and the length Paddle divides by when not exclusive."""
    if adaptive:
        start, end = math.floor(i * size / out), math.ceil((i + 1) * size / out)
        return start, end, end - start
    start = i * stride - pad
    end = min(start + k, size + pad)
    return max(start, 0), min(end, size), end - start


def pool2d(X, ksize, strides, paddings, pooling_type, global_pooling, exclusive, adaptive,
           ceil_mode, padding_algorithm):
    height, width = X.shape[2:]
    if global_pooling:
        ksize = (height, width)
    given = list(paddings) if len(paddings) == 4 else [paddings[0]] * 2 + [paddings[1]] * 2
    pads = (_pads(height, ksize[0], strides[0], padding_algorithm, given[:2])
            + _pads(width, ksize[1], strides[1], padding_algorithm, given[2:]))
    if global_pooling or adaptive:
        pads = [0, 0, 0, 0]
    if adaptive:
        out_h, out_w = ksize
    else:
        extra = [s - 1 if ceil_mode else 0 for s in strides]
        out_h = (height + pads[0] + pads[1] - ksize[0] + extra[0]) // strides[0] + 1
        out_w = (width + pads[2] + pads[3] - ksize[1] + extra[1]) // strides[1] + 1
    out = np.empty(X.shape[:2] + (out_h, out_w), X.dtype)
    for y in range(out_h):
        r0, r1, rows = _window(y, height, out_h, ksize[0], strides[0], pads[0], adaptive)
        for x in range(out_w):
            c0, c1, cols = _window(x, width, out_w, ksize[1], strides[1], pads[2], adaptive)
            window = X[:, :, r0:r1, c0:c1]
            if pooling_type == "max":
                out[:, :, y, x] = window.max(axis=(2, 3))
            else:
                area = (r1 - r0) * (c1 - c0) if exclusive or adaptive else rows * cols
                out[:, :, y, x] = window.sum(axis=(2, 3)) / area
    return out
