"""References for the convolutions: conv2d pads, then sums the kernel taps as strided slices;
conv2d_transpose scatters each tap's product onto a canvas, then crops the padding (numpy
einsum)."""
import math

import numpy as np


def _same_pads(size, k, stride):
    total = max((math.ceil(size / stride) - 1) * stride + k - size, 0)
    return [total // 2, total - total // 2]


def _pads_and_dilations(height, width, kh, kw, strides, paddings, dilations, algorithm):
    if algorithm == "SAME":
        return _same_pads(height, kh, strides[0]) + _same_pads(width, kw, strides[1]), (1, 1)
    if algorithm == "VALID":
        return [0, 0, 0, 0], dilations
    pads = list(paddings) if len(paddings) == 4 else [paddings[0]] * 2 + [paddings[1]] * 2
    return pads, dilations


def _nchw(a, data_format):
    return np.moveaxis(a, -1, 1) if data_format == "NHWC" else a


def _in_layout(a, data_format):
    return np.moveaxis(a, 1, -1) if data_format == "NHWC" else a


def conv2d(Input, Filter, strides, paddings, dilations, groups, padding_algorithm,
           data_format="NCHW"):
    Input = _nchw(Input, data_format)
    _, channels, height, width = Input.shape
    out_channels, _, kh, kw = Filter.shape
    pads, dilations = _pads_and_dilations(height, width, kh, kw, strides, paddings, dilations,
                                          padding_algorithm)
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
    return _in_layout(out, data_format)


def depthwise_conv2d(Input, Filter, strides, paddings, dilations, groups, padding_algorithm,
                     data_format):
    return conv2d(Input, Filter, strides, paddings, dilations, groups, padding_algorithm,
                  data_format)


def conv2d_transpose(Input, Filter, strides, paddings, dilations, groups, padding_algorithm,
                     output_size, output_padding, data_format):
    Input = _nchw(Input, data_format)
    batch, channels, height, width = Input.shape
    _, per_group, kh, kw = Filter.shape
    pads, dilations = _pads_and_dilations(height, width, kh, kw, strides, paddings, dilations,
                                          padding_algorithm)
    sides = []
    for i, (size, k) in enumerate(((height, kh), (width, kw))):
        smallest = (size - 1) * strides[i] - pads[2 * i] - pads[2 * i + 1] + \
            dilations[i] * (k - 1) + 1
        sides.append(output_size[i] if output_size else
                     smallest + (output_padding[i] if output_padding else 0))
    # the canvas holds every tap's target, and the cropped output past its end
    canvas = np.zeros((batch, per_group * groups, pads[0] + sides[0] + (height + kh) *
                       strides[0] * dilations[0], pads[2] + sides[1] + (width + kw) *
                       strides[1] * dilations[1]), Input.dtype)
    in_group = channels // groups
    for g in range(groups):
        xg = Input[:, g * in_group:(g + 1) * in_group]
        for i in range(kh):
            for j in range(kw):
                r, c = i * dilations[0], j * dilations[1]
                canvas[:, g * per_group:(g + 1) * per_group,
                       r:r + strides[0] * (height - 1) + 1:strides[0],
                       c:c + strides[1] * (width - 1) + 1:strides[1]] += np.einsum(
                    "nchw,cm->nmhw", xg, Filter[g * in_group:(g + 1) * in_group, :, i, j])
    return _in_layout(canvas[:, :, pads[0]:pads[0] + sides[0], pads[2]:pads[2] + sides[1]],
                      data_format)


def depthwise_conv2d_transpose(Input, Filter, strides, paddings, dilations, groups,
                               padding_algorithm, output_size, output_padding, data_format):
    return conv2d_transpose(Input, Filter, strides, paddings, dilations, groups,
                            padding_algorithm, output_size, output_padding, data_format)
