"""Learning-rate schedules, stepped once per training step: StepDecay, CosineAnnealing,
LinearWarmup.

A scheduler drives one optimizer's ``learning_rate``: made at step 0 it sets the rate of step
0, and each ``step()`` advances one step and sets the next rate. ``base_lr`` is the optimizer's
learning rate when the scheduler was made. The rate is a pure function of the step number, so
a scheduler's state is just ``last_epoch`` (and ``base_lr``), as in Paddle and PyTorch.

>>> opt = optim.Adam(learning_rate=0.1)
>>> sched = StepDecay(opt, step_size=100, gamma=0.5)
>>> for batch in batches:
...     train_step(batch, opt)
...     sched.step()            # opt.learning_rate: 0.1 for steps 0-99, 0.05 for 100-199, ...
"""
from __future__ import annotations

import math

from tape.errors import InvalidArgumentError

from .optimizer import Optimizer


class LRScheduler:
    """Base class: a subclass defines ``lr_at(step)``."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.base_lr = optimizer.learning_rate
        self.last_epoch = 0
        self._apply()

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0, 1, ...)."""
        raise NotImplementedError

    @property
    def last_lr(self) -> float:
        """The learning rate set for the current step."""
        return self.lr_at(self.last_epoch)

    def step(self) -> None:
        """Advance one step and set the optimizer's learning rate for it."""
        self.last_epoch += 1
        self._apply()

    def _apply(self) -> None:
        self.optimizer.learning_rate = self.lr_at(self.last_epoch)

    def state_dict(self) -> dict:
        return {"last_epoch": self.last_epoch, "base_lr": self.base_lr}

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict()`` and set the optimizer's learning rate to match."""
        missing = sorted(set(self.state_dict()) - set(state))
        if missing:
            raise InvalidArgumentError(f"{type(self).__name__}.load_state_dict: missing key(s) "
                                       f"{missing}")
        self._restore(state)
        self._apply()

    def _restore(self, state: dict) -> None:
        self.last_epoch, self.base_lr = int(state["last_epoch"]), float(state["base_lr"])


def _require(condition: bool, scheduler: str, message: str) -> None:
    if not condition:
        raise InvalidArgumentError(f"{scheduler}: {message}")


class StepDecay(LRScheduler):
    """``lr = base_lr * gamma ** (step // step_size)``: decay by ``gamma`` every ``step_size``
    steps (Paddle's StepDecay, PyTorch's StepLR)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1):
        _require(int(step_size) == step_size and step_size >= 1, "StepDecay",
                 f"step_size must be an integer >= 1, received {step_size!r}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        return self.base_lr * self.gamma ** (step // self.step_size)


class CosineAnnealing(LRScheduler):
    """``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2``: from base_lr
    down to eta_min over ``T_max`` steps, then back up (the closed form of Paddle's
    CosineAnnealingDecay and PyTorch's CosineAnnealingLR)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0):
        _require(int(T_max) == T_max and T_max >= 1, "CosineAnnealing",
                 f"T_max must be an integer >= 1, received {T_max!r}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        cosine = (1 + math.cos(math.pi * step / self.T_max)) / 2
        return self.eta_min + (self.base_lr - self.eta_min) * cosine


class LinearWarmup(LRScheduler):
    """Linear warm-up from ``start_lr`` to ``end_lr`` over ``warmup_steps`` steps, then the
    schedule ``after`` (counted from its own step 0), or the constant ``end_lr`` (Paddle's
    LinearWarmup)::

        step < warmup_steps:  lr = start_lr + (end_lr - start_lr) * step / warmup_steps
        otherwise:            lr = after.lr_at(step - warmup_steps), or end_lr

    ``after`` is made first, on the same optimizer: ``LinearWarmup(opt, 100, 0.0, 0.1,
    after=CosineAnnealing(opt, T_max=1000))``. Step only the LinearWarmup.
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int, start_lr: float, end_lr: float,
                 after: LRScheduler | None = None):
        _require(int(warmup_steps) == warmup_steps and warmup_steps >= 1, "LinearWarmup",
                 f"warmup_steps must be an integer >= 1, received {warmup_steps!r}")
        _require(after is None or after.optimizer is optimizer, "LinearWarmup",
                 "after must drive the same optimizer")
        self.warmup_steps, self.after = int(warmup_steps), after
        self.start_lr, self.end_lr = float(start_lr), float(end_lr)
        super().__init__(optimizer)

    def lr_at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.start_lr + (self.end_lr - self.start_lr) * step / self.warmup_steps
        if self.after is None:
            return self.end_lr
        return self.after.lr_at(step - self.warmup_steps)

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.after is not None:
            state.update({f"after.{k}": v for k, v in self.after.state_dict().items()})
        return state

    def _restore(self, state: dict) -> None:
        super()._restore(state)
        if self.after is not None:
            self.after._restore({k[len("after."):]: v for k, v in state.items()
                                 if k.startswith("after.")})
