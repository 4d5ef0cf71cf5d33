"""Reference for conv2d: pad, then sum the kernel taps as strided slices (numpy einsum)."""
import math

import numpy as np


def _same_pads(size, k, stride):
    total = max((math.ceil(size / stride) - 1) * stride + k - size, 0)
    return [total // 2, total - total // 2]


def conv2d(Input, Filter, strides, paddings, dilations, groups, padding_algorithm):
    _, channels, height, width = Input.shape
    out_channels, _, kh, kw = Filter.shape
    if padding_algorithm == "SAME":
        pads = _same_pads(height, kh, strides[0]) + _same_pads(width, kw, strides[1])
        dilations = (1, 1)
    elif padding_algorithm == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = list(paddings) if len(paddings) == 4 else [paddings[0]] * 2 + [paddings[1]] * 2
    x = np.pad(Input, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    out_h = (x.shape[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    out_w = (x.shape[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    in_group, out_group = channels // groups, out_channels // groups
    out = np.zeros((Input.shape[0], out_channels, out_h, out_w), Input.dtype)
    for g in range(groups):
        xg = x[:, g * in_group:(g + 1) * in_group]
        wg = Filter[g * out_group:(g + 1) * out_group]
        for i in range(kh):
            for j in range(kw):
                r, c = i * dilations[0], j * dilations[1]
                window = xg[:, :, r:r + strides[0] * (out_h - 1) + 1:strides[0],
                            c:c + strides[1] * (out_w - 1) + 1:strides[1]]
                out[:, g * out_group:(g + 1) * out_group] += np.einsum(
                    "nchw,mc->nmhw", window, wg[:, :, i, j])
    return out
