"""Upsample: Paddle's resizing layer over F.interpolate (nearest_interp_v2 / bilinear_interp_v2)."""
from __future__ import annotations

import tape.functional
from tape.variable import Variable

from .layer import Layer


class Upsample(Layer):
    """Resizes 4-D images to ``size`` (h, w) or by ``scale_factor``, by ``mode`` ``"nearest"``
    or ``"bilinear"``; no parameters. Arguments as ``tape.functional.interpolate``.

    >>> Upsample(scale_factor=2)(tape.Variable(np.ones((1, 3, 4, 4), np.float32))).shape
    (1, 3, 8, 8)
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool = False, align_mode: int = 0, data_format: str = "NCHW"):
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self._options = {"align_corners": align_corners, "align_mode": align_mode,
                         "data_format": data_format}

    def __call__(self, x: Variable) -> Variable:
        return tape.functional.interpolate(x, self.size, self.scale_factor, self.mode,
                                           **self._options)

    def __repr__(self):
        return f"Upsample(size={self.size}, scale_factor={self.scale_factor}, mode={self.mode!r})"
