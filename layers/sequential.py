"""Sequential: layers called one after another."""
from __future__ import annotations

from tape.variable import Variable

from .layer import Layer


class Sequential(Layer):
    """Calls its layers in order, each on the previous one's output: ``y = f_n(...f_1(x))``.

    Any callable taking and returning a Variable may stand in a layer (``tape.ops.relu``);
    ``params()`` lists the parameters of those that are Layers, in order.

    >>> model = Sequential(Linear(4, 8, act="relu"), Linear(8, 2))
    >>> model(tape.Variable(np.ones((3, 4), np.float32))).shape
    (3, 2)
    >>> len(model.params())
    4
    """

    def __init__(self, *layers):
        self.layers = list(layers)

    def __call__(self, x: Variable) -> Variable:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index):
        return self.layers[index]

    def __len__(self):
        return len(self.layers)

    def __repr__(self):
        inner = ",\n".join(f"  {layer!r}" for layer in self.layers)
        return f"Sequential(\n{inner}\n)" if self.layers else "Sequential()"
