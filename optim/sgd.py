"""SGD: plain stochastic gradient descent through ``sgd`` ops."""
from __future__ import annotations

import numpy as np

import tape
from tape import dtypes
from tape.variable import Variable, unique_name


class SGD:
    """``p = p - learning_rate * p.grad`` for each parameter that has a gradient.

    ``sgd(params)`` runs one ``sgd`` op per parameter whose ``.grad`` is set (ParamOut is the
    parameter itself: updated in place, outside any recording), then sets ``p.grad = None``;
    parameters without a gradient are skipped. Gradients accumulate over ``backward`` calls until
    the step that consumes them, as in DyNet. ``learning_rate`` may be changed between steps.

    >>> layer = tape.layers.Linear(3, 1)
    >>> sgd = SGD(learning_rate=0.1)
    >>> tape.ops.mean(layer(tape.Variable(np.ones((2, 3), np.float32)))).backward()
    >>> sgd(layer.params())
    """

    def __init__(self, learning_rate: float):
        self.learning_rate = learning_rate

    @property
    def learning_rate(self) -> float:
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._learning_rate = float(value)
        self._rates = {}    # param dtype code -> LearningRate Variable (1,)

    def _rate(self, dtype: int) -> Variable:
        rate = self._rates.get(dtype)
        if rate is None:
            rate = Variable(np.full((1,), self._learning_rate, dtypes.to_numpy(dtype)),
                            name=unique_name("learning_rate"))
            rate.desc.persistable = True
            self._rates[dtype] = rate
        return rate

    def __call__(self, params) -> None:
        run = tape.get_global_tape().add_op
        with tape.no_grad():
            for p in params:
                grad = p.grad
                if grad is None:
                    continue
                run("sgd", {"Param": [p], "LearningRate": [self._rate(p.desc.dtype)],
                            "Grad": [grad]}, {"ParamOut": [p]})
                p.grad = None
