"""DyNet's RNN builders: LSTMBuilder, GRUBuilder, SimpleRNNBuilder, made of stacked cells.

A builder holds the cells (one per layer); a state, from ``initial_state()``, takes one input
at a time and returns the next state, so any Python control flow can drive it::

    s = builder.initial_state()
    for x in xs:
        s = s.add_input(x)
    y = s.output()
"""
from __future__ import annotations

import tape
from tape.errors import InvalidArgumentError
from tape.variable import Variable

from .container import LayerList
from .layer import Layer
from .recurrent import GRUCell, LSTMCell, SimpleRNNCell


class RNNState:
    """The state of a builder's stack after some inputs: immutable; ``add_input`` returns a new
    one. ``x`` is 1-D (one example) or (batch, input_size); outputs and states have the same
    form."""

    def __init__(self, builder: _Builder, layers: list | None = None, one: bool = False,
                 prev: RNNState | None = None):
        self.builder, self._layers, self._one, self._prev = builder, layers, one, prev

    def add_input(self, x: Variable) -> RNNState:
        """The state after ``x``: each layer's cell on the layer below's output."""
        b = self.builder
        one = len(x.shape) == 1
        if len(x.shape) not in (1, 2) or self._layers is not None and one != self._one:
            raise InvalidArgumentError(
                f"{type(b).__name__}: expected x of shape ({b.input_size},) or (batch, "
                f"{b.input_size}), the same rank at every step, received {tuple(x.shape)}")
        if one:
            x = tape.ops.reshape2(x, shape=[1, -1])
        layers = []
        for i, cell in enumerate(b.cells):
            state = None if self._layers is None else self._layers[i]
            state = b.step(cell, x, state)
            layers.append(state)
            x = state[0] if isinstance(state, tuple) else state
        return RNNState(b, layers, one, self)

    def _form(self, v: Variable) -> Variable:
        return tape.ops.reshape2(v, shape=[-1]) if self._one else v

    def h(self) -> list[Variable]:
        """Each layer's output (hidden state), bottom first; empty before any input."""
        return [self._form(s[0] if isinstance(s, tuple) else s) for s in self._layers or []]

    def s(self) -> list[Variable]:
        """All of the state, as DyNet orders it: an LSTM's cell memories c then its h, bottom
        first; a GRU's or simple RNN's h."""
        if self._layers and isinstance(self._layers[0], tuple):
            return [self._form(c) for _, c in self._layers] + self.h()
        return self.h()

    def output(self) -> Variable | None:
        """The top layer's output after the last input (None before any)."""
        return self.h()[-1] if self._layers else None

    def prev(self) -> RNNState | None:
        """The state before the last input."""
        return self._prev

    def transduce(self, xs) -> list[Variable]:
        """The outputs after each of ``xs`` in turn."""
        outputs, state = [], self
        for x in xs:
            state = state.add_input(x)
            outputs.append(state.output())
        return outputs


class _Builder(Layer):
    """A stack of ``num_layers`` cells of ``cell_type``: layer 0 takes input_size, the others
    the hidden_size of the layer below."""

    cell_type: type

    def __init__(self, num_layers: int, input_size: int, hidden_size: int, dtype="float32"):
        if num_layers < 1:
            raise InvalidArgumentError(f"{type(self).__name__}: num_layers must be >= 1, "
                                       f"received {num_layers}")
        self.input_size, self.hidden_size = input_size, hidden_size
        self.cells = LayerList(self.cell_type(input_size if i == 0 else hidden_size,
                                              hidden_size, dtype) for i in range(num_layers))

    def initial_state(self) -> RNNState:
        """The zero state: nothing seen yet."""
        return RNNState(self)

    def transduce(self, xs) -> list[Variable]:
        """The top layer's output after each of ``xs``, from the zero state."""
        return self.initial_state().transduce(xs)

    def step(self, cell, x, state):
        return cell(x, state)

    def __repr__(self):
        return (f"{type(self).__name__}({len(self.cells)}, {self.input_size}, "
                f"{self.hidden_size})")


class LSTMBuilder(_Builder):
    """DyNet's LSTMBuilder of ``num_layers`` LSTMCells (see LSTMCell for the equations).

    >>> b = LSTMBuilder(2, 3, 5)
    >>> s = b.initial_state().add_input(tape.Variable(np.ones(3, np.float32)))
    >>> s.output().shape, len(s.s())
    ((5,), 4)
    >>> [y.shape for y in b.transduce([tape.Variable(np.ones((4, 3), np.float32))] * 2)]
    [(4, 5), (4, 5)]
    """

    cell_type = LSTMCell


class GRUBuilder(_Builder):
    """DyNet's GRUBuilder of ``num_layers`` GRUCells (see GRUCell)."""

    cell_type = GRUCell


class SimpleRNNBuilder(_Builder):
    """DyNet's SimpleRNNBuilder of ``num_layers`` SimpleRNNCells: ``h' = tanh(x W_ih^T + b_ih +
    h W_hh^T + b_hh)``."""

    cell_type = SimpleRNNCell
