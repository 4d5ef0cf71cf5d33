"""Adam and AdamW through ``adam`` and ``adamw`` ops."""
from __future__ import annotations

import tape
from tape.variable import Variable

from .clip import ClipGradBase
from .optimizer import Optimizer, preparable


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction (op ``adam``), per parameter ``p``, gradient ``g``,
    step ``t`` = 1, 2, ...::

        g = g + weight_decay * p                            (coupled L2 decay)
        m = beta1 * m + (1 - beta1) * g                     (m, v start at zeros)
        v = beta2 * v + (1 - beta2) * g * g
        p = p - learning_rate * m_hat / (sqrt(v_hat) + epsilon)
            with m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t)

    the same as ``torch.optim.Adam`` and Paddle's Adam with an L2Decay regularizer: the decay
    term is added to the gradient by ``scale`` and ``sum`` ops before the ``adam`` op, as Paddle
    does. State per parameter name: ``moment1``, ``moment2`` and the powers ``beta1_pow``,
    ``beta2_pow`` (beta^t, the step counter of the bias correction).

    >>> opt = Adam(learning_rate=1e-3)
    >>> tape.ops.mean(layer(x)).backward()
    >>> opt(layer.params())
    """

    state_slots = {"moment1": None, "moment2": None, "beta1_pow": (1,), "beta2_pow": (1,)}
    op_type = "adam"

    def __init__(self, learning_rate: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, weight_decay: float = 0.0,
                 grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, grad_clip)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.weight_decay = weight_decay
        self._attrs = self._op_attrs()

    def _op_attrs(self) -> dict:
        return {"beta1": float(self.beta1), "beta2": float(self.beta2),
                "epsilon": float(self.epsilon)}

    def _gradient(self, param: Variable, grad: Variable) -> Variable:
        """The gradient the op takes: ``grad + weight_decay * param`` (coupled decay)."""
        if not self.weight_decay:
            return grad
        return tape.ops.sum([grad, tape.ops.scale(param, scale=float(self.weight_decay))])

    @preparable
    def update_op(self, param: Variable, grad: Variable):
        state = {slot: self.accumulator(param, slot, fill) for slot, fill in (
            ("moment1", 0.0), ("moment2", 0.0), ("beta1_pow", self.beta1),
            ("beta2_pow", self.beta2))}
        inputs = {"Param": [param], "Grad": [self._gradient(param, grad)],
                  "LearningRate": [self.learning_rate_var(param)],
                  "Moment1": [state["moment1"]], "Moment2": [state["moment2"]],
                  "Beta1Pow": [state["beta1_pow"]], "Beta2Pow": [state["beta2_pow"]]}
        outputs = {"ParamOut": [param], "Moment1Out": [state["moment1"]],
                   "Moment2Out": [state["moment2"]], "Beta1PowOut": [state["beta1_pow"]],
                   "Beta2PowOut": [state["beta2_pow"]]}
        return self.op_type, inputs, outputs, self._attrs


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter; op ``adamw``): each step first
    scales the parameter, ``p = p * (1 - learning_rate * weight_decay)``, then takes the Adam
    step on the plain gradient. The same as ``torch.optim.AdamW`` and Paddle's AdamW (which
    also decays every parameter it is given).

    >>> opt = AdamW(learning_rate=1e-3, weight_decay=0.01)
    """

    op_type = "adamw"

    def __init__(self, learning_rate: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, weight_decay: float = 0.01,
                 grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, beta1, beta2, epsilon, weight_decay, grad_clip)

    def _op_attrs(self) -> dict:
        return {**super()._op_attrs(), "coeff": float(self.weight_decay),
                "with_decay": bool(self.weight_decay)}

    def _gradient(self, param: Variable, grad: Variable) -> Variable:
        return grad     # the decay is decoupled: the op applies it to the parameter
