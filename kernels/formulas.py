"""Scalar formulas that both places compile: each gradient or update written once.

Plain Python on scalars (and, for the window and slice sums, on arrays at given indices): the
CPU loops call them from ``numba.njit`` code (``kernels/jit.py`` registers them with numba when
it first compiles), the CUDA kernels through ``cuda.jit(device=True)`` (``kernels/cuda/device.py``).
What differs between the places — how the loop walks the elements, how results are written
(plain stores or atomics) — stays in ``kernels/cpu`` and ``kernels/cuda``.

Typing is numba's: a float literal promotes float32 operands to float64 (``1.0 - out * out``
runs in float64 and is rounded when stored), as the loops did before they called these. Use
comparisons, not ``max``/``min``: numba 0.68's CUDA target does not compile them (``max(a, b)``
on the CPU is ``b if b > a else a``, which is what to write).

``np.float64(v)`` widens a value to float64 in all three (compiled for the CPU, for CUDA, and
run as Python by the CUDA simulator on numpy scalars); ``float(v)`` would not: numba types
``float(float32)`` as float32. Importing this module does not import numba.
"""
import math

import numpy as np

# ---- activation gradients: (the input or output the gradient reads, dOut[, attributes]) -> dX

def relu_grad(out, dout):
    return dout if out > 0 else 0.0


def sigmoid_grad(out, dout):
    return dout * out * (1.0 - out)


def tanh_grad(out, dout):
    return dout * (1.0 - out * out)


def square_grad(x, dout):
    return 2.0 * dout * x


def leaky_relu_grad(x, dout, alpha):
    return dout if x > 0 else alpha * dout


def clip_grad(x, dout, low, high):
    return dout if low < x < high else 0.0


# ---- gelu: erf and tanh forms ----

SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gelu(v, approximate):
    if approximate:
        return 0.5 * v * (1.0 + math.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))
    return 0.5 * v * (1.0 + math.erf(v * SQRT_HALF))


def gelu_grad(v, dout, approximate):
    if approximate:
        t = math.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v))
        slope = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * SQRT_2_OVER_PI * (
            1.0 + 3.0 * 0.044715 * v * v)
    else:
        slope = 0.5 * (1.0 + math.erf(v * SQRT_HALF)) + v * math.exp(-0.5 * v * v) * \
            INV_SQRT_2PI
    return dout * slope


# ---- dropout ----

def masked_scale(value, keep, factor):
    """A kept element times ``factor``; a dropped one 0."""
    return value * factor if keep else 0.0


# ---- optimizers: one element's update; the loops store what they return ----

def sgd(param, grad, lr):
    return param - lr * grad


def momentum(param, grad, velocity, lr, mu, l2, rescale, nesterov):
    """``(param, velocity)`` after one step."""
    g = grad * rescale
    if l2 != 0:
        g += l2 * param
    v = mu * velocity + g
    if nesterov:
        return param - (g + mu * v) * lr, v
    return param - lr * v, v


def adam(param, grad, moment1, moment2, moment2_max, beta1, rest1, beta2, rest2, lr_t, eps_t,
         keep, amsgrad):
    """``(param, moment1, moment2, moment2_max)`` after one step, in Paddle's form (the bias
    corrections folded into ``lr_t`` and ``eps_t``). ``rest1 = 1 - beta1`` and ``rest2 = 1 -
    beta2`` come in the state's dtype: a literal 1 would promote float32 to float64. Without
    amsgrad ``moment2_max`` is not read (a loop may pass anything) nor meaningful."""
    m = beta1 * moment1 + rest1 * grad
    v = beta2 * moment2 + rest2 * grad * grad
    top = v
    if amsgrad and moment2_max > v:
        top = moment2_max
    return param * keep - lr_t * (m / (math.sqrt(top) + eps_t)), m, v, top


# ---- batch_norm: x seen as (outer, C, inner) ----

def channel_slice_sums(x, dy, o, c, shift, with_dy):
    """Over the slice x[o, c, :], with d = x - shift (a float64): ``(sum d, sum d*d, sum dy,
    sum dy*d)`` in float64 (the dy sums 0 unless ``with_dy``)."""
    sd = 0.0
    sdd = 0.0
    sg = 0.0
    sgd = 0.0
    for i in range(x.shape[2]):
        d = x[o, c, i] - shift
        sd += d
        sdd += d * d
        if with_dy:
            g = np.float64(dy[o, c, i])
            sg += g
            sgd += g * d
    return sd, sdd, sg, sgd


def batch_statistics(total, squares, shift, count, momentum, running_mean, running_var):
    """A channel's ``(mean, biased variance, running mean, running variance)`` from its sums of
    d and d*d (d = x - shift) over ``count`` values."""
    m = total / count
    mean = shift + m
    variance = squares / count - m * m
    if 0.0 > variance:
        variance = 0.0
    return (mean, variance, momentum * running_mean + (1.0 - momentum) * mean,
            momentum * running_var + (1.0 - momentum) * variance)


def scale_shift(x, mul, add):
    """batch_norm's output: x * (scale / std) + (bias - mean * scale / std)."""
    return x * mul + add


def batch_norm_dx(x, dy, mean, mul_dy, mul_centred, add):
    return dy * mul_dy + (x - mean) * mul_centred + add


# ---- layer_norm: rows of x (rows, width) ----

def row_statistics(x, r):
    """``(mean, biased variance, mean - first value)`` of row r in float64, from sums shifted
    by the row's first value."""
    width = x.shape[1]
    k = np.float64(x[r, 0])
    sd = 0.0
    sdd = 0.0
    for j in range(width):
        d = np.float64(x[r, j]) - k
        sd += d
        sdd += d * d
    offset = sd / width
    variance = sdd / width - offset * offset
    if 0.0 > variance:
        variance = 0.0
    return k + offset, variance, offset


def normalise(x, mean, inv_std, scale, bias):
    """layer_norm's output from a row's float64 mean and 1 / std."""
    return (np.float64(x) - mean) * inv_std * scale + bias


# ---- pool2d windows: rows [r0, r1) and columns [q0, q1) of x[n, c] ----

# Paddle's MaxPool starts from -FLT_MAX (what an all-padding window returns)
LOWEST = -3.4028234663852886e38


def window_max(x, n, c, r0, r1, q0, q1):
    best = LOWEST
    for r in range(r0, r1):
        for q in range(q0, q1):
            if x[n, c, r, q] > best:
                best = x[n, c, r, q]
    return best


def window_argmax(x, n, c, r0, r1, q0, q1, top):
    """``(r, q)`` of the window's first cell (row-major) holding ``top``, which takes the
    gradient; ``(-1, -1)`` if none does."""
    for r in range(r0, r1):
        for q in range(q0, q1):
            if x[n, c, r, q] == top:
                return r, q
    return -1, -1


def window_sum(x, n, c, r0, r1, q0, q1):
    total = 0.0
    for r in range(r0, r1):
        for q in range(q0, q1):
            total += x[n, c, r, q]
    return total


def max_of_four(a, b, c, d):
    """The maximum of a 2x2 window (a, b top row), by the comparisons the gradient repeats."""
    ab = a if a >= b else b
    cd = c if c >= d else d
    return ab if ab >= cd else cd


def mean_of_four(a, b, c, d):
    return (a + b + c + d) * 0.25


# ---- ReLU's variants (tape/ops/relu_variants.py): gradients from X or Out, as Paddle's ----

def relu6_grad(out, dout):
    return dout if 0.0 < out < 6.0 else 0.0


def hard_sigmoid_grad(out, dout, slope):
    return dout * slope if 0.0 < out < 1.0 else 0.0


def hard_swish_grad(x, dout, threshold, scale, offset):
    """The derivative of x * min(max(x + offset, 0), threshold) / scale; at the kinks, the
    slope from the right (as Paddle: 0 at x + offset = 0, threshold / scale at the cap)."""
    gate = x + offset
    if gate <= 0.0:
        return 0.0
    if gate >= threshold:
        return dout * threshold / scale
    return dout * (gate + x) / scale


def swish_grad(x, dout):
    # sigmoid(x) written out (a formula calls no other: CUDA device code cannot), from exp of
    # -|x| so that nothing overflows
    e = math.exp(-x if x >= 0.0 else x)
    s = 1.0 / (1.0 + e) if x >= 0.0 else e / (1.0 + e)
    return dout * (s + x * s * (1.0 - s))


def mish(x, threshold):
    if x > threshold:
        return x * math.tanh(x)
    return x * math.tanh(math.log1p(math.exp(x)))


def mish_grad(x, dout, threshold):
    """d/dx of x * tanh(sp): tanh(sp) + x (1 - tanh(sp)^2) sp', sp' = 1 above the threshold
    (sp = x) and sigmoid(x) below it (sp = log(1 + exp(x)))."""
    if x > threshold:
        t = math.tanh(x)
        return dout * (t + x * (1.0 - t * t))
    e = math.exp(x)
    t = math.tanh(math.log1p(e))
    return dout * (t + x * (1.0 - t * t) * (e / (1.0 + e)))


def selu_grad(out, dout, scale, alpha):
    """From Out, whose sign is X's (scale > 0, alpha >= 0): scale where Out > 0, else
    Out + scale * alpha (= scale * alpha * exp(x))."""
    return dout * scale if out > 0.0 else dout * (out + scale * alpha)


# ---- elementwise ops, one element each: the steps a fused group (kernels/fused.py) strings
# together, with the activation gradients above. The fused loop rounds each step's result to
# the array dtype, as storing it would; +, -, *, /, sqrt and x * x are then bit for bit numpy's;
# exp, log, tanh and the sigmoid (libm's scalar calls against numpy's vectorised ones) may
# differ by float rounding.

def add(a, b):
    return a + b


def subtract(a, b):
    return a - b


def multiply(a, b):
    return a * b


def divide(a, b):
    return a / b


def negative(x):
    return -x


def scaled(x, factor, bias, mode):
    """``scale``'s kernel: ``x * factor`` (mode 0), ``x + bias`` (1), ``x * factor + bias``
    (2, two roundings), ``(x + bias) * factor`` (3), with factor and bias already in x's
    dtype."""
    if mode == 0:
        return x * factor
    if mode == 1:
        return x + bias
    if mode == 3:
        return (x + bias) * factor
    return x * factor + bias


def relu(x):
    """np.maximum(x, 0): x when x > 0 or NaN, else 0 (+0.0 for -0.0 too)."""
    return x if x > 0 or x != x else 0.0


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def square(x):
    return x * x


def tanh(x):
    return math.tanh(x)


def exp(x):
    return math.exp(x)


def log(x):
    return math.log(x)


def sqrt(x):
    return math.sqrt(x)
