"""Momentum: SGD with (optionally Nesterov) momentum through ``momentum`` ops."""
from __future__ import annotations

from tape.variable import Variable

from .clip import ClipGradBase
from .optimizer import Optimizer, preparable


class Momentum(Optimizer):
    """Heavy-ball momentum (op ``momentum``), per parameter ``p`` with gradient ``g``::

        g = g + weight_decay * p            (L2 decay, the op's 'l2_decay')
        v = momentum * v + g                (v starts at zeros)
        p = p - learning_rate * v           (use_nesterov: p - learning_rate * (g + momentum * v))

    the same as ``torch.optim.SGD(momentum=..., nesterov=..., weight_decay=...)`` and Paddle's
    Momentum with an L2Decay regularizer. The velocity ``v`` is kept per parameter name.

    >>> opt = Momentum(learning_rate=0.1, momentum=0.9, use_nesterov=True)
    >>> tape.ops.mean(layer(x)).backward()
    >>> opt(layer.params())      # updates every parameter and its velocity in place
    """

    state_slots = {"velocity": None}

    def __init__(self, learning_rate: float, momentum: float = 0.9, use_nesterov: bool = False,
                 weight_decay: float = 0.0, grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, grad_clip)
        self.momentum, self.use_nesterov, self.weight_decay = momentum, use_nesterov, weight_decay
        self._attrs = {"mu": float(momentum), "use_nesterov": bool(use_nesterov),
                       "regularization_method": "l2_decay" if weight_decay else "",
                       "regularization_coeff": float(weight_decay)}

    @preparable
    def update_op(self, param: Variable, grad: Variable):
        velocity = self.accumulator(param, "velocity", 0.0)
        rate = self.learning_rate_var(param)
        return ("momentum",
                {"Param": [param], "Grad": [grad], "Velocity": [velocity],
                 "LearningRate": [rate]},
                {"ParamOut": [param], "VelocityOut": [velocity]}, self._attrs)
