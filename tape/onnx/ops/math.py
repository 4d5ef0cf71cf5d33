"""Converters of the elementwise, activation, comparison, reduction and matrix ops."""
from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ..table import converts

# ---- elementwise X -> Out ----

_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "abs": "Abs", "assign": "Identity"}


@converts(*_UNARY)
def unary(c):
    c.node(_UNARY[c.op.type], [c.input("X")], [c.output("Out")])


@converts("square")
def square(c):
    x = c.input("X")
    c.node("Mul", [x, x], [c.output("Out")])


@converts("gelu")
def gelu(c):
    """Written out with Erf or Tanh (ONNX's Gelu needs opset 20)."""
    x = c.input("X")
    if c.attrs["approximate"]:
        cube = c.node("Mul", [x, c.node("Mul", [x, x])])
        inner = c.node("Add", [x, c.node("Mul", [cube, c.scalar_like(0.044715, x)])])
        t = c.node("Tanh", [c.node("Mul", [inner, c.scalar_like(math.sqrt(2 / math.pi), x)])])
    else:
        t = c.node("Erf", [c.node("Mul", [x, c.scalar_like(1 / math.sqrt(2), x)])])
    half_x = c.node("Mul", [x, c.scalar_like(0.5, x)])
    c.node("Mul", [half_x, c.node("Add", [t, c.scalar_like(1.0, x)])], [c.output("Out")])


@converts("leaky_relu")
def leaky_relu(c):
    """Paddle's Out = X if X > 0 else alpha * X, for any alpha (ONNX's LeakyRelu agrees)."""
    c.node("LeakyRelu", [c.input("X")], [c.output("Out")], alpha=float(c.attrs["alpha"]))


@converts("softplus")
def softplus(c):
    """log(1 + exp(beta X)) / beta, or X where beta * X > threshold; the log(1 + exp) written
    stably as max(z, 0) + log(1 + exp(-|z|))."""
    x, beta = c.input("X"), c.attrs["beta"]
    z = c.node("Mul", [x, c.scalar_like(beta, x)])
    tail = c.node("Log", [c.node("Add", [c.scalar_like(1.0, x), c.node(
        "Exp", [c.node("Neg", [c.node("Abs", [z])])])])])
    soft = c.node("Div", [c.node("Add", [c.node("Relu", [z]), tail]), c.scalar_like(beta, x)])
    above = c.node("Greater", [z, c.scalar_like(c.attrs["threshold"], x)])
    c.node("Where", [above, x, soft], [c.output("Out")])


@converts("pow")
def pow_(c):
    x = c.input("X")
    factor = c.input("FactorTensor") if c.has_input("FactorTensor") else \
        c.scalar_like(c.attrs["factor"], x)
    if c.has_input("FactorTensor"):
        factor = c.node("Reshape", [factor, c.ints([])])
    c.node("Pow", [x, factor], [c.output("Out")])


@converts("clip")
def clip(c):
    x = c.input("X")
    bounds = []
    for slot, attr in (("Min", "min"), ("Max", "max")):
        bound = c.node("Reshape", [c.input(slot), c.ints([])]) if c.has_input(slot) else \
            c.scalar_like(c.attrs[attr], x)
        bounds.append(bound)
    # Paddle: min(max(X, min), max), so max wins where min > max; ONNX's Clip agrees
    c.node("Min", [c.node("Max", [x, bounds[0]]), bounds[1]], [c.output("Out")])


@converts("clip_by_norm")
def clip_by_norm(c):
    x = c.input("X")
    norm = c.node("Sqrt", [c.reduce("ReduceSum", c.node("Mul", [x, x]), None, False)])
    max_norm = c.scalar_like(c.attrs["max_norm"], x)
    scaled = c.node("Div", [c.node("Mul", [x, max_norm]), norm])
    c.node("Where", [c.node("Greater", [norm, max_norm]), scaled, x], [c.output("Out")])


@converts("scale")
def scale(c):
    x, a = c.input("X"), c.attrs
    factor, bias = c.scalar_like(a["scale"], x), c.scalar_like(a["bias"], x)
    if a["bias_after_scale"]:
        c.node("Add", [c.node("Mul", [x, factor]), bias], [c.output("Out")])
    else:
        c.node("Mul", [c.node("Add", [x, bias]), factor], [c.output("Out")])


@converts("sum")
def sum_(c):
    xs = c.inputs("X")
    if len(xs) == 1:
        c.identity(xs[0], c.output("Out"))
    else:
        c.node("Sum", xs, [c.output("Out")])


# ---- Paddle's axis broadcasting ----

def broadcast_operands(c, x_slot: str = "X", y_slot: str = "Y") -> tuple[str, str]:
    """X and Y of an op with Paddle's ``axis``, the shorter given trailing size-1 dims where
    ``axis`` places it before the end, so that ONNX's numpy broadcasting lines them up."""
    x, y = c.input(x_slot), c.input(y_slot)
    long_rank, short_rank = max(c.rank(x), c.rank(y)), min(c.rank(x), c.rank(y))
    axis = c.attrs.get("axis", -1)
    start = long_rank - short_rank if axis == -1 else axis
    trailing = long_rank - short_rank - start
    if short_rank and trailing > 0:
        short = y if c.rank(y) == short_rank else x
        grown = c.unsqueeze(short, range(short_rank, short_rank + trailing))
        return (x, grown) if short is y else (grown, y)
    return x, y


_BINARY = {"elementwise_add": "Add", "elementwise_sub": "Sub", "elementwise_mul": "Mul",
           "elementwise_div": "Div", "elementwise_max": "Max", "elementwise_min": "Min",
           "elementwise_pow": "Pow", "equal": "Equal", "less_than": "Less",
           "less_equal": "LessOrEqual", "greater_than": "Greater",
           "greater_equal": "GreaterOrEqual"}


@converts(*_BINARY)
def binary(c):
    x, y = broadcast_operands(c)
    if c.op.type in _COMPARE_ORDER and c.dtype(c.input("X")) not in _ORDERED:
        x, y = c.cast(x, dtypes.INT32), c.cast(y, dtypes.INT32)   # bool, (u)int8, int16
    c.node(_BINARY[c.op.type], [x, y], [c.output("Out")])


# the dtypes onnxruntime orders and compares (others cast losslessly to int32 first)
_ORDERED = (dtypes.FP32, dtypes.FP64, dtypes.INT32, dtypes.INT64)
_COMPARE_ORDER = {"equal", "less_than", "less_equal", "greater_than", "greater_equal"}


@converts("not_equal")
def not_equal(c):
    x, y = broadcast_operands(c)
    if c.dtype(c.input("X")) not in (*_ORDERED, dtypes.BOOL):
        x, y = c.cast(x, dtypes.INT32), c.cast(y, dtypes.INT32)
    c.node("Not", [c.node("Equal", [x, y])], [c.output("Out")])


@converts("logical_not")
def logical_not(c):
    """Not of X read as bool (any nonzero is true), as Tape's kernel."""
    x = c.input("X")
    if c.dtype(x) != dtypes.BOOL:
        x = c.cast(x, dtypes.BOOL)
    c.node("Not", [x], [c.output("Out")])


@converts("increment")
def increment(c):
    """Out = X + step, in X's dtype."""
    x = c.input("X")
    step = c.const(np.array(c.attrs["step"], dtype=c.np_dtype(x)))
    c.node("Add", [x, step], [c.output("Out")])


@converts("where")
def where(c):
    c.node("Where", [c.input("Condition"), c.input("X"), c.input("Y")], [c.output("Out")])


# ---- reductions ----

_REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
           "reduce_min": "ReduceMin"}


@converts(*_REDUCE)
def reduce(c):
    x, a = c.input("X"), c.attrs
    rank = c.rank(x)
    everything = a["reduce_all"] or not a["dim"] or rank == 0
    axes = list(range(rank)) if everything else sorted(d % rank for d in a["dim"])
    if not axes:    # a 0-D X: nothing to reduce
        c.identity(x, c.output("Out"))
        return
    c.reduce(_REDUCE[c.op.type], x, axes, a["keep_dim"], c.output("Out"))


@converts("mean")
def mean(c):
    x = c.input("X")
    if c.rank(x) == 0:
        c.identity(x, c.output("Out"))
    else:
        c.reduce("ReduceMean", x, list(range(c.rank(x))), False, c.output("Out"))


@converts("squared_l2_norm")
def squared_l2_norm(c):
    x = c.input("X")
    total = c.reduce("ReduceSum", c.node("Mul", [x, x]), None, False)
    c.node("Reshape", [total, c.ints([1])], [c.output("Out")])


# ---- matrix products ----

@converts("matmul_v2")
def matmul_v2(c):
    """Transposes of the last two dims where asked (a 1-D operand ignores its flag). A 1-D
    operand beside a transposed one is made 2-D and its axis dropped after: onnxruntime 1.32
    fuses Transpose + MatMul into a product that gets a 1-D operand wrong."""
    x, y = c.input("X"), c.input("Y")
    ranks = c.rank(x), c.rank(y)
    flags = [c.attrs["trans_x"] and ranks[0] >= 2, c.attrs["trans_y"] and ranks[1] >= 2]
    operands = []
    for v, rank, flag in zip((x, y), ranks, flags):
        if flag:
            perm = list(range(rank))
            perm[-2:] = perm[-1], perm[-2]
            v = c.node("Transpose", [v], perm=perm)
        operands.append(v)
    promoted = any(flags) and 1 in ranks
    if not promoted:
        c.node("MatMul", operands, [c.output("Out")])
        return
    if ranks[0] == 1:
        operands[0] = c.unsqueeze(operands[0], [0])
    if ranks[1] == 1:
        operands[1] = c.unsqueeze(operands[1], [1])
    product = c.node("MatMul", operands)
    c.squeeze(product, [-1] if ranks[1] == 1 else [-2], c.output("Out"))


@converts("mul")
def mul(c):
    """X flattened to 2-D at x_num_col_dims, times Y flattened at y_num_col_dims; Out has X's
    leading dims and Y's trailing ones."""
    x, y, a = c.input("X"), c.input("Y"), c.attrs
    xn, yn = a["x_num_col_dims"], a["y_num_col_dims"]
    product = c.node("MatMul", [c.node("Flatten", [x], axis=xn), c.node("Flatten", [y], axis=yn)])
    c.reshape(product, [*c.shape(x)[:xn], *c.shape(y)[yn:]], c.output("Out"))
