"""SGD: plain stochastic gradient descent through ``sgd`` ops."""
from __future__ import annotations

from tape.variable import Variable

from .optimizer import Optimizer, preparable


class SGD(Optimizer):
    """``p = p - learning_rate * p.grad`` for each parameter that has a gradient (op ``sgd``).

    >>> layer = tape.layers.Linear(3, 1)
    >>> sgd = SGD(learning_rate=0.1)
    >>> tape.ops.mean(layer(tape.Variable(np.ones((2, 3), np.float32)))).backward()
    >>> sgd(layer.params())      # updates w and b in place, then clears their .grad
    """

    @preparable
    def update_op(self, param: Variable, grad: Variable):
        rate = self.learning_rate_var(param)
        return ("sgd", {"Param": [param], "LearningRate": [rate], "Grad": [grad]},
                {"ParamOut": [param]}, {})
