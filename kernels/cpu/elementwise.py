"""elementwise_add / sub / mul / div / max / min / pow and their gradients."""
import numpy as np

from tape.registry import kernel

from ..jit import njit
from .broadcast import aligned, grad_operands, grad_shapes, unbroadcast, unbroadcast_product

# numpy broadcasts a row vector one row per inner loop: 62 against 29 us for the numba loop at
# 256x1024 float32, 4.2 against 3.6 at 64x256, a tie at 64x128 (the loop's ahead-of-time call).
ADD_ROWS_NUMBA_FROM = 8192


@njit
def _add_rows(x, row, out):
    rows, n = out.shape
    for i in range(rows):
        for j in range(n):
            out[i, j] = x[i, j] + row[j]


def _adds_a_row(X, Y, axis) -> bool:
    """Whether ``X + Y`` adds one row ``Y`` (1-D, X's dtype, C-contiguous) to every row of a
    C-contiguous ``X`` large enough for the numba loop (Linear's bias)."""
    return (Y.ndim == 1 and X.ndim >= 2 and X.size >= ADD_ROWS_NUMBA_FROM
            and X.shape[-1] == Y.shape[0] and axis in (-1, X.ndim - 1) and X.dtype == Y.dtype
            and type(X) is np.ndarray and type(Y) is np.ndarray
            and X.flags.c_contiguous and Y.flags.c_contiguous)


@kernel("elementwise_add")
def elementwise_add(X, Y, axis):
    if _adds_a_row(X, Y, axis):
        out = np.empty(X.shape, X.dtype)
        _add_rows(X.reshape(-1, Y.shape[0]), Y, out.reshape(-1, Y.shape[0]))
        return out
    x, y = aligned(X, Y, axis)
    return x + y


@kernel("elementwise_sub")
def elementwise_sub(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x - y


@kernel("elementwise_mul")
def elementwise_mul(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x * y


@kernel("elementwise_div")
def elementwise_div(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x / y


@kernel("elementwise_add_grad")
def elementwise_add_grad(X, Y, dOut, axis, wants):
    xs, ys = grad_shapes(X, Y, axis)
    dx = unbroadcast(dOut, X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast(dOut, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_sub_grad")
def elementwise_sub_grad(X, Y, dOut, axis, wants):
    xs, ys = grad_shapes(X, Y, axis)
    dx = unbroadcast(dOut, X.shape, xs) if "X@GRAD" in wants else None
    dy = -unbroadcast(dOut, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_mul_grad")
def elementwise_mul_grad(X, Y, dOut, axis, wants):
    x, y, xs, ys = grad_operands(X, Y, axis)
    dx = unbroadcast_product(dOut, y, X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast_product(dOut, x, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_div_grad")
def elementwise_div_grad(X, Y, Out, dOut, axis, wants):
    _, y, xs, ys = grad_operands(X, Y, axis)
    dx = unbroadcast(dOut / y, X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast(-dOut * Out / y, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_max")
def elementwise_max(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return np.maximum(x, y)


@kernel("elementwise_min")
def elementwise_min(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return np.minimum(x, y)


@kernel("elementwise_pow")
def elementwise_pow(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return np.power(x, y)


def extremum_grad(X, Y, dOut, axis, wants, beats):
    """The gradients of max (``beats`` is ``np.greater``) or min (``np.less``): dOut goes to the
    input that beats the other, half to each on a tie, and to neither where one is NaN (as
    Paddle)."""
    x, y, xs, ys = grad_operands(X, Y, axis)
    tie = (0.5 * dOut) * (x == y)
    dx = unbroadcast(dOut * beats(x, y) + tie, X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast(dOut * beats(y, x) + tie, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_max_grad")
def elementwise_max_grad(X, Y, dOut, axis, wants):
    return extremum_grad(X, Y, dOut, axis, wants, np.greater)


@kernel("elementwise_min_grad")
def elementwise_min_grad(X, Y, dOut, axis, wants):
    return extremum_grad(X, Y, dOut, axis, wants, np.less)


@kernel("elementwise_pow_grad")
def elementwise_pow_grad(X, Y, dOut, axis, wants):
    # Paddle's: the limits where the formulas give 0 * inf (dX at Y = 0, dY at X = 0 <= Y)
    x, y, xs, ys = grad_operands(X, Y, axis)
    zero = dOut.dtype.type(0)
    dx = dy = None
    with np.errstate(divide="ignore", invalid="ignore"):
        if "X@GRAD" in wants:
            dx = unbroadcast(np.where(y == 0, zero, dOut * y * x ** (y - 1)), X.shape, xs)
        if "Y@GRAD" in wants:
            dy = unbroadcast(np.where((x == 0) & (y >= 0), zero, dOut * x ** y * np.log(x)),
                             Y.shape, ys)
    return dx, dy
