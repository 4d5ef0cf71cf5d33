"""LSTMCell, GRUCell and SimpleRNNCell: one step of a recurrent network, composed of existing ops.

A cell is called once per time step from ordinary Python, so sequences of any length (a
different one each iteration) need no padding: the tape records whatever steps ran. On a lazy
tape a call records its ops as one (a ``tape.function`` of the cell's equations), so that the
calls of one step of many sequences batch as one call, as DyNet's autobatching batches its
builders' steps.
"""
from __future__ import annotations

import math

import numpy as np

import tape
from tape import dtypes
from tape.errors import InvalidArgumentError
from tape.variable import Variable, unique_name

from .layer import Layer, float_dtype, parameter


def _gate_parameters(layer: Layer, prefix: str, input_size: int, hidden_size: int, gates: int,
                     code: int) -> None:
    """weight_ih (gates*H, input_size), weight_hh (gates*H, H), bias_ih and bias_hh (gates*H,),
    all uniform in [-1/sqrt(H), 1/sqrt(H)], named ``<prefix>.w_0``, ``.w_1``, ``.b_0``, ``.b_1``."""
    bound = 1.0 / math.sqrt(hidden_size)
    rows = gates * hidden_size
    for attr, name, shape in (("weight_ih", "w_0", (rows, input_size)),
                              ("weight_hh", "w_1", (rows, hidden_size)),
                              ("bias_ih", "b_0", (rows,)), ("bias_hh", "b_1", (rows,))):
        setattr(layer, attr, parameter(f"{prefix}.{name}", shape, code, "uniform_random",
                                       min=-bound, max=bound))


def _check_input(cell: str, x: Variable, input_size: int) -> None:
    shape = x.desc.shape
    if len(shape) != 2 or shape[1] not in (input_size, -1):
        raise InvalidArgumentError(f"{cell}: expected x of shape (batch, {input_size}), "
                                   f"received {tuple(shape)}")


def _check_state(cell: str, name: str, state: Variable, batch: int, hidden_size: int) -> None:
    # -1: a size known only when the ops run (a zero state under tape.lazy(), in a program)
    shape = state.desc.shape
    if len(shape) != 2 or shape[1] != hidden_size or \
            shape[0] != batch and -1 not in (batch, shape[0]):
        raise InvalidArgumentError(f"{cell}: expected {name} of shape ({batch}, {hidden_size}), "
                                   f"received {tuple(shape)}")


def batch_zeros(x: Variable, batch_axis: int, shape, dtype) -> Variable:
    """Zeros of ``shape`` (a constant: no gradient) on ``x``'s place, whose one -1 takes the
    size of ``x``'s axis ``batch_axis`` when the op runs: ``shape``, ``slice`` and a
    ``fill_constant`` with a ShapeTensorList, as Paddle's own programs make an RNN's zero state.
    Recorded in a program, it follows the batch fed, where a zeros array would keep the traced
    one. Outside a trace the batch is known when the op is recorded: a constant of that shape
    on ``x``'s place then (no ops, and a lazy tape need not compute ``x`` to know the shape)."""
    ops = tape.ops
    batch = x.shape[batch_axis]
    if batch >= 0 and not tape.get_global_tape().tracing:
        return Variable(np.zeros([batch if n == -1 else n for n in shape], dtype),
                        place=x.place)
    size = ops.slice(ops.shape(x), axes=[0], starts=[batch_axis], ends=[batch_axis + 1],
                     decrease_axis=[0])
    # the known sizes as tensors like the batch size (fill_any_like): on x's place
    dims = [size if n == -1 else ops.fill_any_like(size, value=float(n)) for n in shape]
    return ops.fill_constant(ShapeTensorList=dims, shape=list(shape),
                             dtype=dtypes.from_numpy(np.dtype(dtype)), value=0.0)


def _affine(x: Variable, weight: Variable, bias: Variable) -> Variable:
    """``x @ weight.T + bias``."""
    return tape.ops.elementwise_add(tape.ops.matmul_v2(x, weight, trans_y=True), bias)


def _split(x: Variable, num: int) -> list[Variable]:
    """``x`` cut into ``num`` equal pieces along its last axis (one ``split`` op)."""
    return tape.ops.split(x, num=num, axis=-1)


class _TracedStep:
    """A cell's equations as a ``tape.function`` (its ops named after the cell's kind:
    ``function_lstm_cell_<n>``) that checks its arguments as the cell does (``_check``, once
    per signature), and the call it runs on the cell's number of arguments
    (``Function.written_call``). Not a list or tuple: ``Layer.params()`` does not look into
    it, so a replaced parameter its traces captured is not the cell's."""

    __slots__ = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "function", "call")

    def __init__(self, cell, arguments: int):
        self.weight_ih, self.weight_hh = cell.weight_ih, cell.weight_hh
        self.bias_ih, self.bias_hh = cell.bias_ih, cell.bias_hh
        self.function = tape.function(cell._equations, check=cell._check)
        self.function.name = cell._prefix
        self.call = self.function.written_call(arguments)


class _Cell(Layer):
    """What LSTMCell and GRUCell share: gate parameters, input checks, the zero state."""

    gates = 0
    _traced = None      # the _TracedStep a lazy tape records a call with

    def __init__(self, input_size: int, hidden_size: int, dtype="float32"):
        code = float_dtype(type(self).__name__, dtype)
        self.input_size, self.hidden_size = input_size, hidden_size
        self._dtype = np.dtype(dtype)
        prefix = unique_name(self._prefix)
        _gate_parameters(self, prefix, input_size, hidden_size, self.gates, code)

    def zeros(self, batch: int, place=None) -> Variable:
        """A (batch, hidden_size) zero state (a constant: no gradient) on ``place`` (default: the
        default place)."""
        return Variable(np.zeros((batch, self.hidden_size), self._dtype), place=place)

    def zeros_like_batch(self, x: Variable) -> Variable:
        """The zero state for ``x``'s batch, made when the op runs (see ``batch_zeros``)."""
        return batch_zeros(x, 0, (-1, self.hidden_size), self._dtype)

    def _recorded(self, *args: Variable):
        """The cell's equations (``_equations``) on ``args`` (``x`` and the state), checked
        (``_check``): on a lazy tape as ONE op (a ``tape.function`` of them, which checks a
        signature once), so that the calls of one time step of many sequences run as one
        batched call, forward and backward; elsewhere op by op. The trace captures the
        parameters it finds, so it is made again when one of them is replaced."""
        t = tape.get_global_tape()
        if type(t) is not tape.LazyTape:
            self._check(*args)
            return self._equations(*args)
        traced = self._traced
        # (made again where the cell no longer holds the parameters it was made for; asked
        # here, not by a method of it: a frame less per step)
        if traced is None or traced.weight_ih is not self.weight_ih or \
                traced.weight_hh is not self.weight_hh or traced.bias_ih is not self.bias_ih or \
                traced.bias_hh is not self.bias_hh:
            traced = self._traced = _TracedStep(self, len(args))
        return traced.call(traced.function, t, args)

    def __repr__(self):
        return (f"{type(self).__name__}({self.input_size}, {self.hidden_size}, "
                f"dtype={self._dtype})")


class LSTMCell(_Cell):
    """One step of a long short-term memory network, with PyTorch's (and Paddle's) equations::

        i = sigmoid(x W_ii^T + b_ii + h W_hi^T + b_hi)      input gate
        f = sigmoid(x W_if^T + b_if + h W_hf^T + b_hf)      forget gate
        g = tanh(x W_ig^T + b_ig + h W_hg^T + b_hg)         candidate cell
        o = sigmoid(x W_io^T + b_io + h W_ho^T + b_ho)      output gate
        c' = f * c + i * g
        h' = o * tanh(c')

    Args:
        input_size: size of the last dim of ``x``.
        hidden_size: size of ``h`` and ``c``.
        dtype: floating dtype of the parameters, the inputs and the state.

    ``cell(x, state=None) -> (h', c')``: ``x`` (batch, input_size); ``state`` a pair ``(h, c)``
    of (batch, hidden_size), or None for zeros. Parameters (``params()``): ``weight_ih``
    (4 * hidden_size, input_size) and ``weight_hh`` (4 * hidden_size, hidden_size), the gates
    stacked in the order i, f, g, o; ``bias_ih`` and ``bias_hh`` (4 * hidden_size,); all uniform
    in ``[-k, k]`` with ``k = 1 / sqrt(hidden_size)``; named Paddle-style ``lstm_cell_0.w_0``,
    ``.w_1``, ``.b_0``, ``.b_1``. Each call adds matmul_v2, elementwise_add, split, sigmoid,
    tanh and elementwise_mul ops to the global tape; on a lazy tape, one op that runs them
    (calls of one time step of several sequences then run as one batched call).

    >>> cell = LSTMCell(3, 5)
    >>> state = None
    >>> for x in np.ones((4, 2, 3), np.float32):     # 4 steps, batch of 2
    ...     state = cell(tape.Variable(x), state)
    >>> state[0].shape, state[1].shape
    ((2, 5), (2, 5))
    """

    gates = 4
    _prefix = "lstm_cell"

    def __call__(self, x: Variable, state: tuple[Variable, Variable] | None = None):
        if state is None:
            _check_input("LSTMCell", x, self.input_size)
            h = c = self.zeros_like_batch(x)
        else:
            h, c = state
        return self._recorded(x, h, c)

    def _check(self, x: Variable, h: Variable, c: Variable) -> None:
        _check_input("LSTMCell", x, self.input_size)
        batch = x.desc.shape[0]
        _check_state("LSTMCell", "h", h, batch, self.hidden_size)
        _check_state("LSTMCell", "c", c, batch, self.hidden_size)

    def _equations(self, x: Variable, h: Variable, c: Variable):
        ops = tape.ops
        gates = ops.elementwise_add(_affine(x, self.weight_ih, self.bias_ih),
                                    _affine(h, self.weight_hh, self.bias_hh))
        i, f, g, o = _split(gates, 4)
        c = ops.elementwise_add(ops.elementwise_mul(ops.sigmoid(f), c),
                                ops.elementwise_mul(ops.sigmoid(i), ops.tanh(g)))
        h = ops.elementwise_mul(ops.sigmoid(o), ops.tanh(c))
        return h, c


class GRUCell(_Cell):
    """One step of a gated recurrent unit, with PyTorch's (and Paddle's) equations::

        r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr)          reset gate
        z = sigmoid(x W_iz^T + b_iz + h W_hz^T + b_hz)          update gate
        n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))       candidate
        h' = (1 - z) * n + z * h

    Args:
        input_size: size of the last dim of ``x``.
        hidden_size: size of ``h``.
        dtype: floating dtype of the parameters, the inputs and the state.

    ``cell(x, h=None) -> h'``: ``x`` (batch, input_size), ``h`` (batch, hidden_size) or None for
    zeros. Parameters: ``weight_ih`` (3 * hidden_size, input_size), ``weight_hh``
    (3 * hidden_size, hidden_size), gates stacked in the order r, z, n; ``bias_ih``, ``bias_hh``
    (3 * hidden_size,); all uniform in ``[-k, k]``, ``k = 1 / sqrt(hidden_size)``; named
    ``gru_cell_0.w_0``, ``.w_1``, ``.b_0``, ``.b_1``.

    >>> cell = GRUCell(3, 5)
    >>> h = None
    >>> for x in np.ones((4, 2, 3), np.float32):
    ...     h = cell(tape.Variable(x), h)
    >>> h.shape
    (2, 5)
    """

    gates = 3
    _prefix = "gru_cell"

    def __call__(self, x: Variable, h: Variable | None = None) -> Variable:
        if h is None:
            _check_input("GRUCell", x, self.input_size)
            h = self.zeros_like_batch(x)
        return self._recorded(x, h)

    def _check(self, x: Variable, h: Variable) -> None:
        _check_input("GRUCell", x, self.input_size)
        _check_state("GRUCell", "h", h, x.desc.shape[0], self.hidden_size)

    def _equations(self, x: Variable, h: Variable) -> Variable:
        ops = tape.ops
        x_r, x_z, x_n = _split(_affine(x, self.weight_ih, self.bias_ih), 3)
        h_r, h_z, h_n = _split(_affine(h, self.weight_hh, self.bias_hh), 3)
        r = ops.sigmoid(ops.elementwise_add(x_r, h_r))
        z = ops.sigmoid(ops.elementwise_add(x_z, h_z))
        n = ops.tanh(ops.elementwise_add(x_n, ops.elementwise_mul(r, h_n)))
        # (1 - z) * n + z * h, as n + z * (h - n): one op fewer
        return ops.elementwise_add(n, ops.elementwise_mul(z, ops.elementwise_sub(h, n)))


class SimpleRNNCell(_Cell):
    """One step of an Elman network, as paddle.nn.SimpleRNNCell (tanh)::

        h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)

    ``cell(x, h=None) -> h'``: ``x`` (batch, input_size), ``h`` (batch, hidden_size) or None for
    zeros. Parameters ``weight_ih`` (hidden_size, input_size), ``weight_hh`` (hidden_size,
    hidden_size), ``bias_ih``, ``bias_hh`` (hidden_size,); uniform in ``[-k, k]``,
    ``k = 1 / sqrt(hidden_size)``; named ``simple_rnn_cell_0.w_0``, ...

    >>> SimpleRNNCell(3, 5)(tape.Variable(np.ones((2, 3), np.float32))).shape
    (2, 5)
    """

    gates = 1
    _prefix = "simple_rnn_cell"

    def __call__(self, x: Variable, h: Variable | None = None) -> Variable:
        if h is None:
            _check_input("SimpleRNNCell", x, self.input_size)
            h = self.zeros_like_batch(x)
        return self._recorded(x, h)

    def _check(self, x: Variable, h: Variable) -> None:
        _check_input("SimpleRNNCell", x, self.input_size)
        _check_state("SimpleRNNCell", "h", h, x.desc.shape[0], self.hidden_size)

    def _equations(self, x: Variable, h: Variable) -> Variable:
        return tape.ops.tanh(tape.ops.elementwise_add(_affine(x, self.weight_ih, self.bias_ih),
                                                      _affine(h, self.weight_hh, self.bias_hh)))
