"""Gradient clipping between ``backward`` and the optimizer step: by global norm, by value.

Gradients are not recorded, so clipping works on the gradient arrays with numpy. Each clipped
``p.grad`` is replaced by a new Variable of the same dtype (a gradient array may be shared by
several parameters, so it is never scaled in place).

>>> loss.backward()
>>> clip_grad_norm(model.params(), max_norm=1.0)
>>> opt(model.params())
"""
from __future__ import annotations

import math

import numpy as np

from tape.errors import InvalidArgumentError
from tape.variable import Variable


def _with_grad(params) -> list:
    return [p for p in params if p.grad is not None]


def _replace_grad(param: Variable, value) -> None:
    param.grad = Variable(value.astype(param.grad.dtype, copy=False), name=param.grad.name)


def clip_grad_norm(params, max_norm: float) -> float:
    """Scale all gradients by ``max_norm / norm`` when their global L2 norm
    ``norm = sqrt(sum over p of sum(p.grad ** 2))`` exceeds ``max_norm`` (Paddle's
    ClipGradByGlobalNorm). Parameters without a gradient are skipped. Returns ``norm`` (before
    clipping), computed in float64."""
    if not max_norm > 0:
        raise InvalidArgumentError(f"clip_grad_norm: max_norm must be > 0, received {max_norm!r}")
    params = _with_grad(params)
    norm = math.sqrt(sum(float(np.sum(np.square(p.grad.value(), dtype=np.float64)))
                         for p in params))
    if norm > max_norm:
        scale = max_norm / norm
        for p in params:
            _replace_grad(p, p.grad.value() * p.grad.dtype.type(scale))
    return norm


def clip_grad_value(params, clip_value: float) -> None:
    """Clip every gradient element into ``[-clip_value, clip_value]`` (Paddle's
    ClipGradByValue with min = -max). Parameters without a gradient are skipped."""
    if not clip_value > 0:
        raise InvalidArgumentError(f"clip_grad_value: clip_value must be > 0, received "
                                   f"{clip_value!r}")
    for p in _with_grad(params):
        _replace_grad(p, np.clip(p.grad.value(), -clip_value, clip_value))
