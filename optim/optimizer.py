"""Optimizer: the shared loop that turns each parameter's gradient into an update op."""
from __future__ import annotations

import numpy as np

import tape
from tape import dtypes
from tape.variable import Variable, unique_name


class Optimizer:
    """Base class. A subclass says, in ``update_op``, which op updates one parameter.

    ``optimizer(params)`` runs that op (outside any recording, in place: ParamOut is the
    parameter) for each parameter whose ``.grad`` is set, then clears ``.grad``; parameters
    without a gradient are skipped. Gradients accumulate over ``backward`` calls until the step
    that consumes them, as in DyNet. ``learning_rate`` may be changed between steps.
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

    def learning_rate_var(self, dtype: int) -> Variable:
        """The (1,) LearningRate Variable for parameters of ``dtype`` (a VarType code)."""
        rate = self._rates.get(dtype)
        if rate is None:
            rate = Variable(np.full((1,), self._learning_rate, dtypes.to_numpy(dtype)),
                            name=unique_name("learning_rate"))
            rate.desc.persistable = True
            self._rates[dtype] = rate
        return rate

    def update_op(self, param: Variable, grad: Variable):
        """``(op type, inputs, outputs, attrs)`` of the op that updates ``param`` from ``grad``;
        inputs and outputs map slots to lists of Variables (``param`` among the outputs)."""
        raise NotImplementedError

    def __call__(self, params) -> None:
        run = tape.get_global_tape().add_op
        with tape.no_grad():
            for p in params:
                if p.grad is None:
                    continue
                run(*self.update_op(p, p.grad))
                p.grad = None
