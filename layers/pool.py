"""Pool2D, MaxPool2D, AvgPool2D: max or average pooling over NCHW images (op pool2d)."""
from __future__ import annotations

import tape
from tape.errors import InvalidArgumentError
from tape.variable import Variable

from .conv import check_images, padding_attrs, pair
from .layer import Layer


class Pool2D(Layer):
    """Max or average pooling of each channel over (kh, kw) windows moved by ``stride``.

    ``y[n, c, i, j] = max`` (or mean) of ``x[n, c]`` over rows ``[s*i - pad_top, s*i - pad_top +
    kh)`` and columns ``[s*j - pad_left, s*j - pad_left + kw)``, clipped to the image. The mean
    divides by the window's cells on the image (``exclusive=True``) or by its whole area
    (``exclusive=False``, Paddle's rule for padded borders).

    Args:
        kernel_size: an int or (kh, kw).
        stride: an int or a pair; None: the kernel size (windows tile the image).
        padding: an int, (height, width), (top, bottom, left, right), or "same" / "valid".
        pool_type: "max" or "avg".
        global_pooling: one window over the whole image (kernel_size and padding are ignored):
            ``y`` is (N, C, 1, 1).
        ceil_mode: round the output sides up, so a partial last window counts.
        exclusive: see above (average pooling only).

    Shapes: ``x`` (N, C, H, W) -> ``y`` (N, C, H_out, W_out) with
    ``H_out = (H + pad_top + pad_bottom - kh) // s + 1``. The gradient of max pooling goes to
    the first maximum of each window. No parameters.

    >>> pool = Pool2D(2, pool_type="max")
    >>> pool(tape.Variable(np.ones((2, 3, 8, 8), np.float32))).shape
    (2, 3, 4, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, pool_type: str = "max",
                 global_pooling: bool = False, *, ceil_mode: bool = False,
                 exclusive: bool = True):
        if pool_type not in ("max", "avg"):
            raise InvalidArgumentError(f"{type(self).__name__}: pool_type must be 'max' or "
                                       f"'avg', received {pool_type!r}")
        ksize = pair(type(self).__name__, "kernel_size", kernel_size)
        strides = ksize if stride is None else pair(type(self).__name__, "stride", stride)
        self.pool_type = pool_type
        self._attrs = {"ksize": ksize, "strides": strides,
                       "pooling_type": pool_type, "global_pooling": global_pooling,
                       "ceil_mode": ceil_mode, "exclusive": exclusive,
                       **padding_attrs(type(self).__name__, padding)}

    def __call__(self, x: Variable) -> Variable:
        check_images(type(self).__name__, x)
        return tape.ops.pool2d(x, **self._attrs)

    def __repr__(self):
        a = self._attrs
        return (f"{type(self).__name__}(ksize={tuple(a['ksize'])}, "
                f"stride={tuple(a['strides'])}, pool_type={self.pool_type!r})")


class MaxPool2D(Pool2D):
    """``Pool2D(kernel_size, stride, padding, pool_type="max")``.

    >>> MaxPool2D(2)(tape.Variable(np.ones((1, 1, 4, 4), np.float32))).shape
    (1, 1, 2, 2)
    """

    def __init__(self, kernel_size, stride=None, padding=0, *, ceil_mode: bool = False):
        super().__init__(kernel_size, stride, padding, "max", ceil_mode=ceil_mode)


class AvgPool2D(Pool2D):
    """``Pool2D(kernel_size, stride, padding, pool_type="avg", exclusive=exclusive)``.

    >>> AvgPool2D(2)(tape.Variable(np.ones((1, 1, 4, 4), np.float32))).value()[0, 0]
    array([[1., 1.],
           [1., 1.]], dtype=float32)
    """

    def __init__(self, kernel_size, stride=None, padding=0, *, ceil_mode: bool = False,
                 exclusive: bool = True):
        super().__init__(kernel_size, stride, padding, "avg", ceil_mode=ceil_mode,
                         exclusive=exclusive)
