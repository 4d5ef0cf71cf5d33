"""Conv2D and Conv2DTranspose: 2-D convolution layers, emitted as Paddle's do (conv2d, or
depthwise_conv2d when each channel is its own group; their transposes; bias; act)."""
from __future__ import annotations

import tape
import tape.functional
from tape.errors import InvalidArgumentError
from tape.variable import Variable, unique_name

from .layer import Layer, activation, constant, float_dtype, kaiming_uniform


def _ints(value):
    """``value`` as a tuple when it is a list or tuple of ints (not bools), else None."""
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def pair(layer: str, name: str, value) -> tuple:
    """``value`` as (height, width): an int is used for both."""
    values = (value, value) if isinstance(value, int) else _ints(value)
    if values is None or len(values) != 2:
        raise InvalidArgumentError(f"{layer}: {name} must be an int or a pair of ints, "
                                   f"received {value!r}")
    return values


def padding_attrs(layer: str, padding) -> dict:
    """The ``paddings`` / ``padding_algorithm`` attributes for a layer's ``padding`` argument: an
    int, (height, width), (top, bottom, left, right), or "same" / "valid"."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise InvalidArgumentError(f"{layer}: padding must be 'same', 'valid' or ints, "
                                       f"received {padding!r}")
        return {"paddings": (0, 0), "padding_algorithm": padding.upper()}
    values = (padding, padding) if isinstance(padding, int) else _ints(padding)
    if values is None or len(values) not in (2, 4):
        raise InvalidArgumentError(f"{layer}: padding must be an int, 2 or 4 ints, 'same' or "
                                   f"'valid', received {padding!r}")
    return {"paddings": values, "padding_algorithm": "EXPLICIT"}


def check_images(layer: str, x: Variable, channels: int | None = None) -> None:
    """``x`` is (N, C, H, W), with ``channels`` channels when given (-1 dims match)."""
    shape = tuple(x.shape)
    if len(shape) != 4 or channels is not None and shape[1] not in (channels, -1):
        expected = f"(N, {channels}, H, W)" if channels is not None else "(N, C, H, W)"
        raise InvalidArgumentError(f"{layer}: expected x of shape {expected}, received {shape}")


def check_groups(layer: str, groups: int, in_channels: int, out_channels: int) -> None:
    if groups < 1 or in_channels % groups or out_channels % groups:
        raise InvalidArgumentError(f"{layer}: groups={groups} must be >= 1 and divide "
                                   f"in_channels={in_channels} and out_channels={out_channels}")


class Conv2D(Layer):
    """A 2-D convolution over NCHW images: ``y = act(conv2d(x, w) + b)``.

    ``y[n, m] = act(b[m] + sum_c sum_(i,j) w[m, c, i, j] * x_pad[n, g*C/G + c, s*y + d*i, s*x +
    d*j])`` over the input channels ``c`` of output channel ``m``'s group ``g`` (stride ``s``,
    dilation ``d``, ``G`` groups).

    Args:
        in_channels: C of ``x``; out_channels: M of ``y``.
        kernel_size, stride, dilation: an int or (height, width).
        padding: zeros around ``x``: an int, (height, width), (top, bottom, left, right), or
            "same" (output side ceil(in / stride)) / "valid" (none).
        groups: split the channels into this many independent convolutions (it must divide C
            and M).
        act: name of a registered unary op applied last (``"relu"``, ...), or None.
        bias: add a learnt bias per output channel.
        dtype: floating dtype of the parameters and of the ``x`` it takes.

    Shapes: ``x`` (N, C, H, W) -> ``y`` (N, M, H_out, W_out) with
    ``H_out = (H + pad_top + pad_bottom - d * (k - 1) - 1) // s + 1``. Parameters: ``w`` (M,
    C / groups, kh, kw), Kaiming uniform in ``[-l, l]``, ``l = sqrt(6 / (C / groups * kh *
    kw))``, and ``b`` (M,), zeros; named ``conv2d_<i>.w_0`` / ``conv2d_<i>.b_0``. Each call adds
    ``conv2d`` (``depthwise_conv2d`` when groups = C > 1 and C divides M), ``elementwise_add``
    (axis=1) and ``act`` to the global tape, as Paddle's conv2d layer does.

    >>> conv = Conv2D(1, 4, 3, padding=1, act="relu")
    >>> conv(tape.Variable(np.ones((2, 1, 8, 8), np.float32))).shape
    (2, 4, 8, 8)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, act: str | None = None, bias: bool = True,
                 dtype="float32"):
        code = float_dtype("Conv2D", dtype)
        check_groups("Conv2D", groups, in_channels, out_channels)
        kh, kw = pair("Conv2D", "kernel_size", kernel_size)
        self.in_channels, self.out_channels, self.act = in_channels, out_channels, act
        self._act = activation("Conv2D", act)
        # tuples, not lists: the op's attribute check is memoised for hashable values
        self._attrs = {"strides": pair("Conv2D", "stride", stride),
                       "dilations": pair("Conv2D", "dilation", dilation),
                       "groups": groups, **padding_attrs("Conv2D", padding)}
        prefix = unique_name("conv2d")
        fan_in = in_channels // groups * kh * kw
        self.w = kaiming_uniform(f"{prefix}.w_0", (out_channels, in_channels // groups, kh, kw),
                                 code, fan_in)
        self.b = constant(f"{prefix}.b_0", (out_channels,), code) if bias else None
        depthwise = groups == in_channels != 1 and out_channels % in_channels == 0
        self._conv = tape.ops.depthwise_conv2d if depthwise else tape.ops.conv2d

    def __call__(self, x: Variable) -> Variable:
        check_images("Conv2D", x, self.in_channels)
        h = self._conv(x, self.w, **self._attrs)
        if self.b is not None:
            h = tape.ops.elementwise_add(h, self.b, axis=1)
        return h if self._act is None else self._act(h)

    def __repr__(self):
        kh, kw = self.w.shape[2:]
        return (f"Conv2D({self.in_channels}, {self.out_channels}, ({kh}, {kw}), "
                f"act={self.act!r}, dtype={self.w.dtype})")


class Conv2DTranspose(Layer):
    """A transposed 2-D convolution (the adjoint of a convolution, "deconvolution") over NCHW
    images: ``y = conv2d_transpose(x, w) + b``.

    Each input cell (i, j) of channel c adds ``x[n, c, i, j] * w[c, m]`` to the output window
    at (i * stride - pad_top, j * stride - pad_left), taps ``dilation`` apart.

    Args:
        in_channels: C of ``x``; out_channels: M of ``y``.
        kernel_size, stride, dilation: an int or (height, width).
        padding: an int, (height, width), (top, bottom, left, right), or "same" / "valid".
        output_padding: cells added to the smallest output size (each < stride or dilation).
        groups: split the channels into this many independent convolutions (it must divide C
            and M).
        bias: add a learnt bias per output channel.
        dtype: floating dtype of the parameters and of the ``x`` it takes.

    Shapes: ``x`` (N, C, H, W) -> ``y`` (N, M, H_out, W_out) with ``H_out = (H - 1) * s -
    pad_top - pad_bottom + d * (k - 1) + 1 + output_padding``, or the ``output_size`` given to
    the call. Parameters: ``w`` (C, M / groups, kh, kw), Kaiming uniform with fan-in M / groups
    * kh * kw, and ``b`` (M,), zeros; named ``conv2d_transpose_<i>.w_0`` / ``.b_0``. Each call
    adds ``conv2d_transpose`` (``depthwise_conv2d_transpose`` when groups = C = M > 1, as
    Paddle emits) and ``elementwise_add`` (axis=1).

    >>> up = Conv2DTranspose(4, 2, 3, stride=2)
    >>> up(tape.Variable(np.ones((1, 4, 8, 8), np.float32))).shape
    (1, 2, 17, 17)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, dilation=1, bias: bool = True,
                 dtype="float32"):
        code = float_dtype("Conv2DTranspose", dtype)
        check_groups("Conv2DTranspose", groups, in_channels, out_channels)
        kh, kw = pair("Conv2DTranspose", "kernel_size", kernel_size)
        self.in_channels, self.out_channels = in_channels, out_channels
        self._options = {"stride": pair("Conv2DTranspose", "stride", stride),
                         "dilation": pair("Conv2DTranspose", "dilation", dilation),
                         "output_padding": output_padding, "groups": groups,
                         "padding": padding}
        padding_attrs("Conv2DTranspose", padding)   # checks it
        prefix = unique_name("conv2d_transpose")
        self.w = kaiming_uniform(f"{prefix}.w_0", (in_channels, out_channels // groups, kh, kw),
                                 code, out_channels // groups * kh * kw)
        self.b = constant(f"{prefix}.b_0", (out_channels,), code) if bias else None

    def __call__(self, x: Variable, output_size=None) -> Variable:
        check_images("Conv2DTranspose", x, self.in_channels)
        return tape.functional.conv2d_transpose(x, self.w, self.b, output_size=output_size,
                                                **self._options)

    def __repr__(self):
        kh, kw = self.w.shape[2:]
        return (f"Conv2DTranspose({self.in_channels}, {self.out_channels}, ({kh}, {kw}), "
                f"dtype={self.w.dtype})")
