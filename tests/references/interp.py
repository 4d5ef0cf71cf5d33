"""References for bilinear_interp_v2 and nearest_interp_v2: a Python loop over output cells,
each reading its source cells with Paddle's float32 index arithmetic written out per cell."""
import numpy as np


def _sides(in_hw, out_h, out_w, scale):
    if len(scale) > 1:
        scales = [float(np.float32(s)) for s in scale[:2]]
        return [int(np.float32(n) * np.float32(s)) for n, s in zip(in_hw, scales)], scales
    return [out_h, out_w], [-1.0, -1.0]


def _ratio(n_in, n_out, s, align_corners):
    if n_out <= 1:
        return np.float32(0)
    if align_corners:
        return np.float32(np.float32(n_in - 1) / np.float32(n_out - 1))
    return np.float32(1.0 / s) if s > 0 else np.float32(np.float32(n_in) / np.float32(n_out))


def _taps(k, n_in, ratio, method, align_corners, align_mode, height):
    """[(source cell, weight)] of output cell k along one axis (Paddle computes the centred
    position in double along the height, in float32 along the width)."""
    at_k = np.float32(ratio * np.float32(k))
    if method == "nearest":
        return [(int(float(at_k) + 0.5) if align_corners else int(at_k), 1.0)]
    centred = align_mode == 0 and not align_corners
    middle = float(ratio) * (k + 0.5) - 0.5 if height else \
        np.float32(ratio * np.float32(k + 0.5) - np.float32(0.5))
    low = max(int(middle) if centred else int(at_k), 0)
    high = min(low + 1, n_in - 1)
    far = np.float32(max(np.float32(middle), np.float32(0)) - np.float32(low)) if centred else \
        np.float32(at_k - np.float32(low))
    return [(low, float(np.float32(1) - far)), (high, float(far))]


def _interp(X, data_layout, out_h, out_w, scale, interp_method, align_corners, align_mode):
    x = X.transpose(0, 3, 1, 2) if data_layout == "NHWC" else X
    (oh, ow), scales = _sides(x.shape[2:], out_h, out_w, scale)
    if (oh, ow) == x.shape[2:]:
        return X.copy()
    ratios = [_ratio(n, o, s, align_corners) for n, o, s in zip(x.shape[2:], (oh, ow), scales)]
    out = np.zeros(x.shape[:2] + (oh, ow), X.dtype)
    for k in range(oh):
        for i, wi in _taps(k, x.shape[2], ratios[0], interp_method, align_corners, align_mode,
                           True):
            for j_out in range(ow):
                for j, wj in _taps(j_out, x.shape[3], ratios[1], interp_method, align_corners,
                                   align_mode, False):
                    out[:, :, k, j_out] += x[:, :, i, j] * wi * wj
    return out.transpose(0, 2, 3, 1) if data_layout == "NHWC" else out


def bilinear_interp_v2(X, data_layout, out_h, out_w, scale, interp_method, align_corners,
                       align_mode):
    return _interp(X, data_layout, out_h, out_w, scale, interp_method, align_corners, align_mode)


def nearest_interp_v2(X, data_layout, out_h, out_w, scale, interp_method, align_corners,
                      align_mode):
    return _interp(X, data_layout, out_h, out_w, scale, interp_method, align_corners, align_mode)
