"""Paddle's fused ``rnn`` op: a multi-layer, optionally bidirectional LSTM, GRU or Elman network
over a whole (time-major) sequence, with per-element lengths, and its gradient ``rnn_grad``.

Slots, attributes and weight order are Paddle's: WeightList holds, for each layer and direction
(forward first) in turn, ``weight_ih`` (G*H, in) and ``weight_hh`` (G*H, H), then, in the same
order, ``bias_ih`` and ``bias_hh`` (G*H,); G is 4 (LSTM gates i, f, g, o), 3 (GRU gates r, z, n)
or 1; ``in`` is input_size for layer 0, else num_directions * H. PreState and State are [h, c]
for an LSTM, else [h], each (num_layers * num_directions, batch, H).
"""
import numpy as np

from .. import dtypes
from ..attribute import BOOLEAN, FLOAT, INT, STRING, AtLeast, Attr, InRange, OneOf
from ..registry import GradOp, Slot, register_op
from .rules import fmt, require_float

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
# What Reserve keeps per layer, direction, step and element, in units of H: the gate values (an
# LSTM's i, f, g, o; a GRU's r, z, n and W_hn h + b_hn; an Elman network's new h), the state
# after the step, the step's output and (LSTM) the cell after the step.
RESERVED = {"LSTM": 7, "GRU": 6, "RNN_TANH": 3, "RNN_RELU": 3}


def _dim_ok(have: int, want: int) -> bool:
    return have == want or have < 0 or want < 0


def _rnn_shape(ctx):
    a = ctx.attrs
    mode, hidden, layers = a["mode"], a["hidden_size"], a["num_layers"]
    directions = 2 if a["is_bidirec"] else 1
    x = ctx.input("Input")
    require_float(ctx, "Input", x)
    if len(x.shape) != 3 or not _dim_ok(x.shape[2], a["input_size"]):
        raise ctx.error(f"input Input must be (time, batch, input_size={a['input_size']}), "
                        f"received {fmt(x.shape)}")
    steps, batch = x.shape[:2]
    states = ctx.inputs("PreState")
    want_states = 2 if mode == "LSTM" else 1
    state_shape = (layers * directions, batch, hidden)
    if len(states) != want_states:
        raise ctx.error(f"input PreState must hold {want_states} tensor(s) for mode {mode}, "
                        f"received {len(states)}")
    for i, s in enumerate(states):
        if len(s.shape) != 3 or not all(map(_dim_ok, s.shape, state_shape)) or \
                s.dtype != x.dtype:
            raise ctx.error(f"input PreState[{i}] ({s.name}) must be {dtypes.name(x.dtype)} "
                            f"{fmt(state_shape)}, received {dtypes.name(s.dtype)} "
                            f"{fmt(s.shape)}")
    weights = ctx.inputs("WeightList")
    rows, count = GATES[mode] * hidden, layers * directions
    if len(weights) != 4 * count:
        raise ctx.error(f"input WeightList must hold 4 * num_layers * num_directions = "
                        f"{4 * count} tensors, received {len(weights)}")
    for k in range(count):
        width = a["input_size"] if k < directions else directions * hidden
        for i, shape in ((2 * k, (rows, width)), (2 * k + 1, (rows, hidden)),
                         (2 * count + 2 * k, (rows,)), (2 * count + 2 * k + 1, (rows,))):
            w = weights[i]
            if w.shape != shape or w.dtype != x.dtype:
                raise ctx.error(f"input WeightList[{i}] ({w.name}) must be "
                                f"{dtypes.name(x.dtype)} {fmt(shape)}, received "
                                f"{dtypes.name(w.dtype)} {fmt(w.shape)}")
    if ctx.has_input("SequenceLength"):
        lengths = ctx.input("SequenceLength")
        if lengths.dtype not in (dtypes.INT32, dtypes.INT64) or len(lengths.shape) != 1 or \
                not _dim_ok(lengths.shape[0], batch):
            raise ctx.error(f"input SequenceLength must be int32 or int64 (batch,) = "
                            f"({batch},), received {dtypes.name(lengths.dtype)} "
                            f"{fmt(lengths.shape)}")
    ctx.set_output("Out", (steps, batch, directions * hidden), x.dtype)
    ctx.set_outputs("State", [(state_shape, x.dtype)] * want_states)
    ctx.set_output("Reserve", (layers, directions, steps, batch, RESERVED[mode] * hidden),
                   x.dtype)
    if not a["is_test"]:    # as Paddle's kernel, which writes no mask for inference
        ctx.set_output("DropoutState", (layers - 1, steps, batch, directions * hidden),
                       dtypes.UINT8)


def _rnn_case(d):
    mode = d.choice(tuple(GATES))
    layers, directions = d.integer(1, 2), d.integer(1, 2)
    steps, batch, size, hidden = d.integer(1, 4), d.integer(1, 3), d.integer(1, 3), d.integer(1, 3)
    count, rows = layers * directions, GATES[mode] * hidden
    weights = [d.floats((rows, size if k < directions else directions * hidden), -0.8, 0.8)
               if j == 0 else d.floats((rows, hidden), -0.8, 0.8)
               for k in range(count) for j in range(2)]
    weights += [d.floats((rows,), -0.5, 0.5) for _ in range(2 * count)]
    away = (0.0,) if mode == "RNN_RELU" else None
    inputs = {"Input": d.floats((steps, batch, size), away_from=away, margin=0.1),
              "PreState": [d.floats((count, batch, hidden), -0.9, 0.9)
                           for _ in range(2 if mode == "LSTM" else 1)],
              "WeightList": weights}
    if d.boolean():
        inputs["SequenceLength"] = d.ints((batch,), 0, steps).astype(
            d.choice((np.int32, np.int64)))
    attrs = {"mode": mode, "num_layers": layers, "is_bidirec": directions == 2,
             "input_size": size, "hidden_size": hidden, "is_test": d.boolean()}
    if layers > 1 and d.boolean():   # dropout between layers; a fixed seed keeps it repeatable
        attrs.update(dropout_prob=d.choice((0.25, 0.5)), seed=d.integer(1, 1000))
    return inputs, attrs


register_op(
    "rnn",
    inputs=[Slot("Input", "(time, batch, input_size) float"),
            Slot("PreState", "initial states: [h, c] (LSTM) or [h], each (num_layers * "
                 "num_directions, batch, hidden_size)", duplicable=True),
            Slot("WeightList", "the weights then the biases of every layer and direction (see "
                 "the module doc)", duplicable=True),
            Slot("SequenceLength", "int (batch,): steps t >= SequenceLength[b] keep b's state "
                 "and output zeros", dispensable=True)],
    outputs=[Slot("Out", "(time, batch, num_directions * hidden_size): the last layer's "
                  "outputs, directions concatenated"),
             Slot("DropoutState", "uint8 (num_layers - 1, time, batch, num_directions * "
                  "hidden_size): which inputs of layers past the first dropout kept (not "
                  "written when is_test)", dispensable=True),
             Slot("State", "final states, laid out as PreState", duplicable=True),
             Slot("Reserve", "what the gradient reads: per layer, direction, step and element "
                  "the gates, state and output", intermediate=True)],
    attrs=[Attr("dropout_prob", FLOAT, 0.0, "probability of dropping an element of each "
                "layer's input but the first's while training", check=InRange(0.0, 1.0)),
           Attr("is_bidirec", BOOLEAN, False, "also run each layer from the end backward"),
           Attr("input_size", INT, 10, "the width of Input", check=AtLeast(1)),
           Attr("hidden_size", INT, 100, "the width of the state", check=AtLeast(1)),
           Attr("num_layers", INT, 1, "how many layers are stacked", check=AtLeast(1)),
           Attr("mode", STRING, "RNN_TANH", "the cell", check=OneOf(*GATES)),
           Attr("seed", INT, 0, "dropout's seed; 0: the process generator"),
           Attr("is_test", BOOLEAN, False, "inference: no dropout")],
    infer_shape=_rnn_shape, case=_rnn_case,
    grad=GradOp(reads=["Input", "PreState", "WeightList", "SequenceLength", "DropoutState",
                       "Reserve"],
                grads=("Input", "PreState", "WeightList"), out_grads=("Out", "State")),
    doc="LSTM: i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (x W_ih^T + b_ih + h W_hh^T + "
        "b_hh); c' = f c + i g; h' = o tanh(c'). GRU: r, z = sigmoid(x W_i{r,z}^T + b_i{r,z} + "
        "h W_h{r,z}^T + b_h{r,z}); n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)); h' = n + "
        "z (h - n). RNN_TANH / RNN_RELU: h' = tanh / relu(x W_ih^T + b_ih + h W_hh^T + b_hh). "
        "Layer l > 0 reads layer l - 1's outputs (dropped out while training); a step past an "
        "element's length keeps its state and outputs zeros.")
