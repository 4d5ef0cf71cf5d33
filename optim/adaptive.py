"""Adagrad, RMSProp, Adadelta, Adamax and Lamb through Paddle's ops of those names, with
Paddle's defaults."""
from __future__ import annotations

import tape
from tape.variable import Variable

from .clip import ClipGradBase
from .optimizer import Optimizer, preparable


class _StateOptimizer(Optimizer):
    """An update op reading the parameter's state and writing it back in place.

    ``slots`` maps each op slot (``Moment``) to its state slot and initial value
    (``("moment", 0.0)``; ``state_slots`` gives the shapes); the op writes ``<slot>Out`` for
    each but those in ``read_only``. ``attrs`` are the op's attributes."""

    op_type = ""
    slots: dict = {}
    read_only: tuple = ()

    @preparable
    def update_op(self, param: Variable, grad: Variable):
        state = {slot: self.accumulator(param, name, fill)
                 for slot, (name, fill) in self.slots.items()}
        inputs = {"Param": [param], "Grad": [grad],
                  "LearningRate": [self.learning_rate_var(param)],
                  **{slot: [v] for slot, v in state.items()}}
        outputs = {"ParamOut": [param], **{f"{slot}Out": [v] for slot, v in state.items()
                                          if slot not in self.read_only}}
        return self.op_type, inputs, outputs, self.attrs


class Adagrad(_StateOptimizer):
    """Adagrad (Duchi et al.; op ``adagrad``), per parameter ``p`` with gradient ``g``::

        G = G + g * g                                   (G starts at initial_accumulator_value)
        p = p - learning_rate * g / (sqrt(G) + epsilon)

    as Paddle's Adagrad (and ``torch.optim.Adagrad`` with ``eps`` outside the root).

    >>> opt = Adagrad(learning_rate=0.1)
    >>> opt(layer.params())
    """

    op_type = "adagrad"
    state_slots = {"moment": None}

    def __init__(self, learning_rate: float, epsilon: float = 1e-6,
                 initial_accumulator_value: float = 0.0, grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, grad_clip)
        self.slots = {"Moment": ("moment", float(initial_accumulator_value))}
        self.attrs = {"epsilon": float(epsilon)}


class RMSProp(_StateOptimizer):
    """RMSProp (Hinton; op ``rmsprop``), per parameter ``p`` with gradient ``g``::

        E[g^2] = rho * E[g^2] + (1 - rho) * g * g
        E[g]   = rho * E[g] + (1 - rho) * g                      (centered only)
        v = E[g^2] - E[g]^2 if centered else E[g^2]
        step = momentum * step + learning_rate * g / sqrt(v + epsilon)
        p = p - step

    as Paddle's RMSProp (all state starts at zeros).

    >>> opt = RMSProp(learning_rate=0.01, centered=True)
    """

    op_type = "rmsprop"
    state_slots = {"mean_square": None, "moment": None, "mean_grad": None}
    slots = {"MeanSquare": ("mean_square", 0.0), "Moment": ("moment", 0.0),
             "MeanGrad": ("mean_grad", 0.0)}

    def __init__(self, learning_rate: float, rho: float = 0.95, epsilon: float = 1e-6,
                 momentum: float = 0.0, centered: bool = False,
                 grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, grad_clip)
        self.attrs = {"decay": float(rho), "epsilon": float(epsilon),
                      "momentum": float(momentum), "centered": bool(centered)}


class Adadelta(_StateOptimizer):
    """Adadelta (Zeiler; op ``adadelta``), per parameter ``p`` with gradient ``g``::

        E[g^2] = rho * E[g^2] + (1 - rho) * g * g
        d = -sqrt((E[d^2] + epsilon) / (E[g^2] + epsilon)) * g
        E[d^2] = rho * E[d^2] + (1 - rho) * d * d
        p = p + learning_rate * d

    as Paddle's Adadelta and ``torch.optim.Adadelta``.

    >>> opt = Adadelta(learning_rate=1.0)
    """

    op_type = "adadelta"
    state_slots = {"avg_squared_grad": None, "avg_squared_update": None}
    slots = {"AvgSquaredGrad": ("avg_squared_grad", 0.0),
             "AvgSquaredUpdate": ("avg_squared_update", 0.0)}

    def __init__(self, learning_rate: float = 0.001, epsilon: float = 1e-6, rho: float = 0.95,
                 grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, grad_clip)
        self.attrs = {"rho": float(rho), "epsilon": float(epsilon)}


class Adamax(_StateOptimizer):
    """Adamax (Kingma & Ba; op ``adamax``), per parameter ``p`` with gradient ``g``, step
    ``t`` = 1, 2, ...::

        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u + epsilon, |g|)
        p = p - learning_rate / (1 - beta1^t) * m / u

    as Paddle's Adamax. The op leaves ``beta1_pow`` (beta1^t) as it is; a ``scale`` op
    advances it after each update, eagerly and in ``minimize``'s program, as Paddle does.

    >>> opt = Adamax(learning_rate=0.002)
    """

    op_type = "adamax"
    state_slots = {"moment": None, "inf_norm": None, "beta1_pow": (1,)}
    read_only = ("Beta1Pow",)

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, grad_clip)
        self.slots = {"Moment": ("moment", 0.0), "InfNorm": ("inf_norm", 0.0),
                      "Beta1Pow": ("beta1_pow", float(beta1))}
        self.attrs = {"beta1": float(beta1), "beta2": float(beta2), "epsilon": float(epsilon)}

    def __call__(self, params) -> None:
        params = [p for p in params if p.grad is not None]
        super().__call__(params)
        with tape.no_grad():
            for p in params:
                power = self.accumulator(p, "beta1_pow", self.attrs["beta1"])
                tape.get_global_tape().add_op("scale", {"X": [power]}, {"Out": [power]},
                                              {"scale": self.attrs["beta1"]})

    def minimize(self, loss, program) -> list:
        from tape.static.program import OPTIMIZE, desc_of, new_op
        ops = super().minimize(loss, program)
        block = desc_of(program).global_block()
        powers = [op.input("Beta1Pow")[0] for op in ops if op.type == "adamax"]
        return ops + [block.append_op(new_op("scale", {"X": [name]}, {"Out": [name]},
                                             {"scale": self.attrs["beta1"]}, OPTIMIZE))
                      for name in powers]


class Lamb(_StateOptimizer):
    """LAMB (You et al.; op ``lamb``), per parameter ``p`` with gradient ``g``, step ``t``::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        r = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon) + lamb_weight_decay * p
        p = p - learning_rate * (||p|| / ||r||) * r

    the trust ratio ``||p|| / ||r||`` taken as 1 where a norm is 0 (or, unless
    ``always_adapt``, without weight decay); as Paddle's Lamb.

    >>> opt = Lamb(learning_rate=0.01, lamb_weight_decay=0.01)
    """

    op_type = "lamb"
    state_slots = {"moment1": None, "moment2": None, "beta1_pow": (1,), "beta2_pow": (1,)}

    def __init__(self, learning_rate: float = 0.001, lamb_weight_decay: float = 0.01,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-6,
                 always_adapt: bool = False, grad_clip: ClipGradBase | None = None):
        super().__init__(learning_rate, grad_clip)
        self.slots = {"Moment1": ("moment1", 0.0), "Moment2": ("moment2", 0.0),
                      "Beta1Pow": ("beta1_pow", float(beta1)),
                      "Beta2Pow": ("beta2_pow", float(beta2))}
        self.attrs = {"weight_decay": float(lamb_weight_decay), "beta1": float(beta1),
                      "beta2": float(beta2), "epsilon": float(epsilon),
                      "always_adapt": bool(always_adapt)}
