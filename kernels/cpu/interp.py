"""bilinear_interp_v2 and nearest_interp_v2, forward and gradient: two GEMMs with per-axis
weight matrices.

Both resizings are separable: ``Out = Wh @ X @ Ww.T`` per image, with an (out, in) weight matrix
per axis, and the gradient is the transposed product ``Wh.T @ dOut @ Ww``. The matrices are
built once per geometry in float32 with Paddle's arithmetic (its kernels hold the weights as
float, whatever X's dtype), so Tape's results are Paddle's to rounding.
"""
import functools

import numpy as np

from tape.errors import InvalidArgumentError
from tape.geometry import interp_output_size, interp_ratio
from tape.registry import kernel


@functools.lru_cache(maxsize=256)
def _axis_weights(in_size, out_size, ratio, method, align_corners, align_mode, double_position):
    """The (out_size, in_size) weight matrix of one axis (float64, read-only).

    Paddle 3.3.1's bilinear kernel computes a centred sampling position ratio * (k + 0.5) - 0.5
    in double along the height and in float32 along the width (``double_position``): measured
    on its outputs, bit for bit."""
    k = np.arange(out_size)
    at_k = ratio * k.astype(np.float32)                # float32, as ratio * k in C++
    if out_size and int(at_k[-1]) >= in_size:
        # a scale given with an output size too large for it (Paddle reads past the input)
        raise InvalidArgumentError(
            f"{method}_interp_v2: output cell {out_size - 1} of {out_size} reads input cell "
            f"{int(at_k[-1])} at the step {float(ratio)} of the given scale, past the input's "
            f"{in_size} cells: expected an output size of at most about input * scale")
    # float32 weights (Paddle's), summed in float64 where two taps read one cell
    weights = np.zeros((out_size, in_size))
    if method == "nearest":
        source = (at_k.astype(np.float64) + 0.5) if align_corners else at_k
        weights[k, np.minimum(source.astype(np.int64), in_size - 1)] = 1.0
    else:
        centred = align_mode == 0 and not align_corners
        half = np.float32(0.5)
        middle = np.float64(ratio) * (k + 0.5) - 0.5 if double_position else \
            ratio * (k.astype(np.float32) + half) - half
        low = np.maximum((middle if centred else at_k).astype(np.int64), 0)
        high = np.minimum(low + 1, in_size - 1)
        position = np.maximum(middle.astype(np.float32), np.float32(0)) if centred else at_k
        far = (position - low.astype(np.float32)).astype(np.float32)
        np.add.at(weights, (k, low), np.float32(1.0) - far)
        np.add.at(weights, (k, high), far)
    weights.flags.writeable = False
    return weights


def _values(tensor):
    """A small host list of a (host or device) tensor's values."""
    return tensor.reshape(-1).tolist()


def _geometry(X, OutSize, SizeTensor, Scale, data_layout, out_h, out_w, scale, interp_method,
              align_corners, align_mode):
    """``((Wh, Ww), (in_h, in_w), (out_h, out_w))`` for X and the op's size inputs."""
    in_hw = X.shape[1:3] if data_layout == "NHWC" else X.shape[2:]
    out_hw, scales = interp_output_size(
        in_hw, (out_h, out_w), scale, None if Scale is None else _values(Scale),
        None if OutSize is None else _values(OutSize),
        None if not SizeTensor else [_values(t)[0] for t in SizeTensor])
    if min(out_hw) < 1 or min(scales) <= 0 < max(scales):
        raise InvalidArgumentError(
            f"{interp_method}_interp_v2: the output size {list(out_hw)} (scales "
            f"{list(scales)}) of X {tuple(X.shape)} must be > 0")
    weights = tuple(_axis_weights(i, o, interp_ratio(i, o, s, align_corners), interp_method,
                                  align_corners, align_mode, height)
                    for i, o, s, height in zip(in_hw, out_hw, scales, (True, False)))
    return weights, tuple(in_hw), tuple(out_hw)


def _resize(a, rows, cols, channels_last):
    """``rows @ image @ cols.T`` for each image of ``a``, in ``a``'s layout and dtype."""
    images = a.transpose(0, 3, 1, 2) if channels_last else a
    out = np.matmul(np.matmul(np.asarray(rows, a.dtype), images), np.asarray(cols, a.dtype).T)
    return np.ascontiguousarray(out.transpose(0, 2, 3, 1) if channels_last else out)


@kernel("bilinear_interp_v2")
@kernel("nearest_interp_v2")
def interp_v2(X, OutSize, SizeTensor, Scale, data_layout, out_h, out_w, scale, interp_method,
              align_corners, align_mode):
    (rows, cols), in_hw, out_hw = _geometry(X, OutSize, SizeTensor, Scale, data_layout, out_h,
                                            out_w, scale, interp_method, align_corners,
                                            align_mode)
    if in_hw == out_hw:     # Paddle copies X then, whatever the weights would be
        return X.copy()
    return _resize(X, rows, cols, data_layout == "NHWC")


@kernel("bilinear_interp_v2_grad")
@kernel("nearest_interp_v2_grad")
def interp_v2_grad(X, OutSize, SizeTensor, Scale, dOut, data_layout, out_h, out_w, scale,
                   interp_method, align_corners, align_mode):
    (rows, cols), in_hw, out_hw = _geometry(X, OutSize, SizeTensor, Scale, data_layout, out_h,
                                            out_w, scale, interp_method, align_corners,
                                            align_mode)
    if in_hw == out_hw:
        return dOut.copy()
    return _resize(dOut, rows.T, cols.T, data_layout == "NHWC")
