"""LSTM and GRU: recurrent networks over whole sequences, as paddle.nn.LSTM and paddle.nn.GRU.

They run LSTMCell / GRUCell in a Python loop over the time steps, so they are composed of the
ops the cells add (plus split, squeeze2, stack, concat, where and dropout) and need no op of their
own; backward, static export and every place come with those ops.
"""
from __future__ import annotations

import numpy as np

import tape
from tape.errors import InvalidArgumentError
from tape.variable import Variable

from .dropout import Dropout
from .layer import Layer, float_dtype
from .recurrent import GRUCell, LSTMCell, batch_zeros

_DIRECTIONS = {"forward": 1, "bidirect": 2, "bidirectional": 2}
_WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def _unstack(x: Variable, num: int) -> list[Variable]:
    """The ``num`` slices (rows, width) of a (num, rows, width) ``x`` along its first axis: one
    reshape2 and one split, whatever ``num``."""
    flat = tape.ops.reshape2(x, shape=[-1, x.shape[-1]])
    return [flat] if num == 1 else tape.ops.split(flat, num=num, axis=0)


class _RNN(Layer):
    """What LSTM and GRU share: the stack of cells, the time loop, masking, argument checks."""

    cell_type: type          # LSTMCell or GRUCell
    state_names: tuple[str, ...] = ("h",)

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 direction: str = "forward", time_major: bool = False, dropout: float = 0.0,
                 dtype="float32"):
        name = type(self).__name__
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidArgumentError(f"{name}: {arg} must be a positive integer, received "
                                           f"{value!r}")
        if direction not in _DIRECTIONS:
            raise InvalidArgumentError(f"{name}: direction must be one of {list(_DIRECTIONS)}, "
                                       f"received {direction!r}")
        if not 0.0 <= dropout <= 1.0:
            raise InvalidArgumentError(f"{name}: dropout must be in [0, 1], received {dropout!r}")
        float_dtype(name, dtype)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.direction, self.time_major = direction, bool(time_major)
        self.num_directions = _DIRECTIONS[direction]
        self._dtype = np.dtype(dtype)
        self.dropout = Dropout(dropout)          # on each layer's input but the first's
        # The cells compute; their parameters are also this layer's own, under Paddle's names
        # and in Paddle's order (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0,
        # weight_ih_l0_reverse, ...), so that state_dict() has Paddle's keys. The cells live in
        # a dict set after them: a Variable held twice keeps its first key.
        cells = {}
        for layer in range(num_layers):
            width = input_size if layer == 0 else hidden_size * self.num_directions
            for reverse in range(self.num_directions):
                cell = self.cell_type(width, hidden_size, dtype)
                for attr in _WEIGHTS:
                    setattr(self, f"{attr}_l{layer}{'_reverse' if reverse else ''}",
                            getattr(cell, attr))
                cells[layer, reverse] = cell
        self._cells = cells

    def __call__(self, inputs: Variable, initial_states=None, sequence_length=None):
        self._check_inputs(inputs)
        steps, batch = inputs.shape[:2] if self.time_major else inputs.shape[1::-1]
        valid = self._valid_steps(sequence_length, batch, steps)
        zero = batch_zeros(inputs, 1 if self.time_major else 0, (-1, self.hidden_size),
                           self._dtype)
        states = self._split_states(initial_states, batch, zero)
        # time-major inside: each layer's input is cut into steps, its outputs stacked, at once
        x = inputs if self.time_major else tape.ops.transpose2(inputs, axis=[1, 0, 2])
        finals = []
        for layer in range(self.num_layers):
            if layer:
                x = self.dropout(x)
            xs = _unstack(x, steps)
            outputs = []
            for reverse in range(self.num_directions):
                out, final = self._run(self._cells[layer, reverse], xs, states.pop(0), valid,
                                       zero, reverse)
                outputs.append(tape.ops.stack(out, axis=0))
                finals.append(final)
            x = outputs[0] if len(outputs) == 1 else tape.ops.concat(outputs, axis=-1)
        x = x if self.time_major else tape.ops.transpose2(x, axis=[1, 0, 2])
        stacked = tuple(tape.ops.stack(list(parts), axis=0) for parts in zip(*finals))
        return x, stacked if len(stacked) > 1 else stacked[0]

    def _run(self, cell, xs, state, valid, zero, reverse):
        """One direction of one layer over the steps ``xs``: the outputs in time order and the
        final state. A step past an element's length (``valid[t]`` False) keeps its state and
        outputs zeros, so the reverse direction starts at each element's last valid step."""
        outputs = [None] * len(xs)
        for t in (reversed(range(len(xs))) if reverse else range(len(xs))):
            new = self._step(cell, xs[t], state)
            if isinstance(valid, list):     # (batch, 1) 0/1 Variables: lengths known at run time
                ops, keep = tape.ops, valid[t]
                drop = ops.scale(keep, scale=-1.0, bias=1.0)
                outputs[t] = ops.elementwise_mul(new[0], keep)
                state = tuple(ops.elementwise_add(ops.elementwise_mul(n, keep),
                                                  ops.elementwise_mul(s, drop))
                              for n, s in zip(new, state))
                continue
            if valid is None or valid[t].all():
                state, outputs[t] = new, new[0]
                continue
            keep = Variable(np.repeat(valid[t][:, None], self.hidden_size, axis=1),
                            place=zero.place)
            outputs[t] = tape.ops.where(keep, new[0], zero)
            state = tuple(tape.ops.where(keep, n, s) for n, s in zip(new, state))
        return outputs, state

    def _step(self, cell, x, state):
        """The cell on one step; states are tuples of Variables, ``(h, c)`` or ``(h,)``."""
        raise NotImplementedError

    # ---- argument checks, before any op runs ----

    def _check_inputs(self, inputs) -> None:
        layout = "(time, batch, {})" if self.time_major else "(batch, time, {})"
        shape = getattr(inputs, "shape", None)
        if (not isinstance(inputs, Variable) or len(shape) != 3
                or shape[-1] != self.input_size or min(shape[:2]) < 1):
            raise InvalidArgumentError(
                f"{type(self).__name__}: expected inputs of shape "
                f"{layout.format(self.input_size)} with batch and time >= 1, received "
                f"{tuple(shape) if isinstance(inputs, Variable) else type(inputs).__name__}")
        if inputs.dtype != self._dtype:
            raise InvalidArgumentError(f"{type(self).__name__}: expected inputs of dtype "
                                       f"{self._dtype}, received {inputs.dtype}")

    def _valid_steps(self, sequence_length, batch: int, steps: int):
        """None; or a bool (steps, batch) array: whether step t is within element b's length;
        or, for lengths given as a Variable, per step a (batch, 1) Variable of 0 and 1 (made by
        ops, so a traced program takes any batch and any lengths)."""
        if sequence_length is None:
            return None
        name = type(self).__name__
        if isinstance(sequence_length, Variable):
            shape = tuple(sequence_length.shape)
            if sequence_length.dtype.kind not in "iu" or len(shape) != 1 or \
                    shape[0] not in (batch, -1):
                raise InvalidArgumentError(
                    f"{name}: expected sequence_length of integers of shape (batch,) = "
                    f"({batch},), received {sequence_length.dtype} {shape}")
            ops, code = tape.ops, float_dtype(name, self._dtype)
            return [ops.unsqueeze2(ops.cast(ops.greater_than(
                sequence_length, ops.fill_any_like(sequence_length, value=float(t))),
                out_dtype=code), axes=[1]) for t in range(steps)]
        lengths = np.asarray(sequence_length)
        if lengths.dtype.kind not in "iu" or lengths.shape != (batch,):
            raise InvalidArgumentError(
                f"{name}: expected sequence_length of integers of shape (batch,) = ({batch},), "
                f"received {lengths.dtype} {lengths.shape}")
        if lengths.min() < 0 or lengths.max() > steps:
            raise InvalidArgumentError(f"{name}: sequence_length must be in [0, time] = "
                                       f"[0, {steps}], received {lengths.tolist()}")
        return np.arange(steps)[:, None] < lengths[None, :]

    def _split_states(self, initial_states, batch: int, zero: Variable) -> list[tuple]:
        """Per layer and direction (Paddle's order), the initial state as a tuple."""
        count = self.num_layers * self.num_directions
        if initial_states is None:
            return [(zero,) * len(self.state_names)] * count
        parts = (initial_states,) if len(self.state_names) == 1 else initial_states
        expected = (count, batch, self.hidden_size)
        ok = isinstance(parts, (tuple, list)) and len(parts) == len(self.state_names) and all(
            isinstance(v, Variable) and tuple(v.shape) == expected and v.dtype == self._dtype
            for v in parts)
        if not ok:
            got = [f"{v.dtype} {tuple(v.shape)}" if isinstance(v, Variable) else type(v).__name__
                   for v in (parts if isinstance(parts, (tuple, list)) else [parts])]
            what = f"({', '.join(self.state_names)}), each" if len(self.state_names) > 1 else "h"
            raise InvalidArgumentError(
                f"{type(self).__name__}: expected initial_states {what} of shape (num_layers * "
                f"num_directions, batch, hidden_size) = {expected}, {self._dtype}, received "
                f"{', '.join(got)}")
        return list(zip(*(_unstack(v, count) for v in parts)))

    def __repr__(self):
        return (f"{type(self).__name__}({self.input_size}, {self.hidden_size}, "
                f"num_layers={self.num_layers}, direction={self.direction!r}, "
                f"time_major={self.time_major}, dropout={self.dropout.p}, dtype={self._dtype})")


_SHAPES = """
    Shapes: ``inputs`` (batch, time, input_size), or (time, batch, input_size) when
    ``time_major``; ``sequence_length`` an int array (or an int Variable: a traced program
    then takes it as a feed, of any batch) of shape (batch,) with values in [0, time]: step t
    of element b is padding when ``t >= sequence_length[b]`` (the state stays,
    the output is zero; the reverse direction starts at the last valid step). Outputs (batch,
    time, num_directions * hidden_size) (time-major when ``time_major``), the directions'
    outputs concatenated on the last axis. States (num_layers * num_directions, batch,
    hidden_size), layer by layer, the forward direction first; zeros when not given.

    Parameters, named and laid out as Paddle's (``state_dict()`` keys): for layer k and each
    direction (suffix ``_reverse`` for the backward one) ``weight_ih_l{k}`` (G * hidden_size,
    in), ``weight_hh_l{k}`` (G * hidden_size, hidden_size), ``bias_ih_l{k}`` and ``bias_hh_l{k}``
    (G * hidden_size,), where G is the number of gates (LSTM 4, GRU 3) and in is input_size for
    layer 0, else num_directions * hidden_size; uniform in [-k, k], k = 1 / sqrt(hidden_size);
    the gates stacked as in LSTMCell and GRUCell.
"""

_ARGS = """
    Args:
        input_size: the width of ``inputs``.
        hidden_size: the width of the state and of each direction's output.
        num_layers: how many recurrent layers are stacked.
        direction: ``"forward"``, or ``"bidirect"`` / ``"bidirectional"`` (a second cell per
            layer runs from the end of each sequence to its start).
        time_major: whether ``inputs`` and outputs are (time, batch, ...).
        dropout: probability of dropping an element of each layer's input but the first's while
            training (upscale_in_train).
        dtype: floating dtype of the parameters, the inputs and the states.
"""


class LSTM(_RNN):
    __doc__ = """A multi-layer LSTM over whole sequences, as paddle.nn.LSTM: each layer runs an
    LSTMCell (i, f, g, o gates) over the time steps, on the previous layer's outputs.

    ``lstm(inputs, initial_states=None, sequence_length=None) -> (outputs, (h, c))``;
    ``initial_states`` a pair ``(h0, c0)`` or None.
    """ + _ARGS + _SHAPES + """
    >>> lstm = LSTM(16, 32, num_layers=2, direction="bidirect")
    >>> out, (h, c) = lstm(tape.Variable(np.ones((4, 23, 16), np.float32)))
    >>> out.shape, h.shape, c.shape
    ((4, 23, 64), (4, 4, 32), (4, 4, 32))
    """

    cell_type = LSTMCell
    state_names = ("h", "c")

    def _step(self, cell, x, state):
        return cell(x, state)


class GRU(_RNN):
    __doc__ = """A multi-layer GRU over whole sequences, as paddle.nn.GRU: each layer runs a
    GRUCell (r, z, n gates) over the time steps, on the previous layer's outputs.

    ``gru(inputs, initial_states=None, sequence_length=None) -> (outputs, h)``;
    ``initial_states`` an ``h0`` or None.
    """ + _ARGS + _SHAPES + """
    >>> gru = GRU(16, 32, num_layers=2)
    >>> out, h = gru(tape.Variable(np.ones((4, 23, 16), np.float32)))
    >>> out.shape, h.shape
    ((4, 23, 32), (2, 4, 32))
    """

    cell_type = GRUCell

    def _step(self, cell, x, state):
        return (cell(x, state[0]),)
