"""Converters of the creation ops (shape, fill_constant, fill_any_like, assign_value, range) and
of Paddle's fused rnn op."""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ... import dtypes
from ..table import converts


@converts("shape")
def shape(c):
    c.cast(c.node("Shape", [c.input("Input")]), dtypes.INT32, c.output("Out"))


def _filled(c, shape: str, value, code: int, out: str) -> str:
    """ConstantOfShape: ``value`` (a number) of Paddle dtype ``code`` in the 1-D int64 ``shape``."""
    tensor = numpy_helper.from_array(np.array([value]).astype(dtypes.to_numpy(code)))
    return c.node("ConstantOfShape", [shape], [out], value=tensor)


@converts("fill_constant")
def fill_constant(c):
    """The shape from ShapeTensor or ShapeTensorList when given (sizes known at run time),
    else the attribute; the value from ValueTensor when given, else the attributes."""
    a, out = c.attrs, c.output("Out")
    if c.has_input("ShapeTensor"):
        size = c.cast(c.input("ShapeTensor"), dtypes.INT64)
    elif c.has_input("ShapeTensorList"):
        size = c.node("Concat", [c.cast(c.node("Reshape", [t, c.ints([1])]), dtypes.INT64)
                                 for t in c.inputs("ShapeTensorList")], axis=0)
    else:
        size = None
    if c.has_input("ValueTensor"):
        value = c.cast(c.node("Reshape", [c.input("ValueTensor"), c.ints([1])]), a["dtype"])
        c.node("Expand", [value, size or c.ints(a["shape"])], [out])
        return
    value = float(a["str_value"]) if a["str_value"] else a["value"]
    if size is None:
        c.identity(c.const(np.full(a["shape"], value).astype(dtypes.to_numpy(a["dtype"]))), out)
    else:
        _filled(c, size, value, a["dtype"], out)


@converts("fill_any_like")
def fill_any_like(c):
    x = c.input("X")
    code = c.dtype(x) if c.attrs["dtype"] == -1 else c.attrs["dtype"]
    _filled(c, c.node("Shape", [x]), c.attrs["value"], code, c.output("Out"))


@converts("assign_value")
def assign_value(c):
    a = c.attrs
    value = np.array(a["values"]).astype(dtypes.to_numpy(a["dtype"])).reshape(a["shape"])
    c.identity(c.const(value), c.output("Out"))


@converts("range")
def range_(c):
    """ONNX's Range for integers; for floats the count ceil(|End - Start| / |Step|) is taken in
    Out's dtype, as Paddle's kernel takes it (onnxruntime's Range counts in double), and the
    values are Start + i * Step (Paddle adds Step to the previous value: within rounding)."""
    start, end, step = (c.node("Reshape", [c.input(s), c.ints([])])
                        for s in ("Start", "End", "Step"))
    code = c.dtype(c.input("Start"))
    if code not in dtypes.FLOATING:
        c.node("Range", [start, end, step], [c.output("Out")])
        return
    count = c.node("Ceil", [c.node("Abs", [c.node("Div", [c.node("Sub", [end, start]), step])])])
    index = c.node("Range", [c.const(np.int64(0)), c.cast(count, dtypes.INT64),
                             c.const(np.int64(1))])
    c.node("Add", [c.node("Mul", [c.cast(index, code), step]), start], [c.output("Out")])


# ONNX's gate order from Paddle's: LSTM i, f, g, o -> i, o, f, c; GRU r, z, n -> z, r, h
_GATE_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN_TANH": [0], "RNN_RELU": [0]}
_ONNX_OP = {"LSTM": "LSTM", "GRU": "GRU", "RNN_TANH": "RNN", "RNN_RELU": "RNN"}


def _gates(c, w: str, order: list, rows: int) -> str:
    """Paddle's gate blocks of ``w`` (rows: G * H, ...) in ONNX's order."""
    if order == [0]:
        return w
    blocks = c.node("Reshape", [w, c.ints([len(order), rows // len(order), -1])])
    permuted = c.node("Gather", [blocks, c.ints(order)], axis=0)
    return c.node("Reshape", [permuted, c.ints([rows, -1])])


@converts("rnn")
def rnn(c):
    """One ONNX LSTM / GRU / RNN node per layer (both directions in one), gates reordered;
    the layer's (time, directions, batch, H) output made (time, batch, directions * H) for the
    next. Inference only: no dropout between layers."""
    a = c.attrs
    mode, hidden, layers = a["mode"], a["hidden_size"], a["num_layers"]
    directions = 2 if a["is_bidirec"] else 1
    count, rows = layers * directions, len(_GATE_ORDER[mode]) * hidden
    weights, states = c.inputs("WeightList"), c.inputs("PreState")
    order = _GATE_ORDER[mode]
    lengths = c.cast(c.input("SequenceLength"), dtypes.INT32) \
        if c.has_input("SequenceLength") else ""
    extra = {"linear_before_reset": 1} if mode == "GRU" else \
        {"activations": ["Relu"] * directions} if mode == "RNN_RELU" else {}
    x, finals = c.input("Input"), [[] for _ in states]
    for layer in range(layers):
        ks = range(layer * directions, (layer + 1) * directions)

        def stacked(parts):
            return c.node("Concat", [c.unsqueeze(p, [0]) for p in parts], axis=0)

        w = stacked([_gates(c, weights[2 * k], order, rows) for k in ks])
        r = stacked([_gates(c, weights[2 * k + 1], order, rows) for k in ks])
        b = stacked([c.node("Concat", [_gates(c, weights[2 * count + 2 * k + j], order, rows)
                                       for j in (0, 1)], axis=0) for k in ks])
        b = c.node("Reshape", [b, c.ints([directions, 2 * rows])])
        initial = [c.node("Slice", [s, c.ints([ks[0]]), c.ints([ks[-1] + 1]), c.ints([0])])
                   for s in states]
        outs = c.node(_ONNX_OP[mode], [x, w, r, b, lengths, *initial],
                      1 + len(states), hidden_size=hidden,
                      direction="bidirectional" if directions == 2 else "forward", **extra)
        for i, final in enumerate(outs[1:]):
            if lengths:     # an empty sequence keeps its initial state (onnxruntime: zeros)
                empty = c.unsqueeze(c.node("Equal", [lengths, c.const(np.int32(0))]), [0, 2])
                final = c.node("Where", [empty, initial[i], final])
            finals[i].append(final)
        y = c.node("Transpose", [outs[0]], perm=[0, 2, 1, 3])
        x = c.node("Reshape", [y, c.ints([0, 0, directions * hidden])])
    c.identity(x, c.output("Out"))
    for i, parts in enumerate(finals):
        c.node("Concat", parts, [c.output("State", i)], axis=0)
