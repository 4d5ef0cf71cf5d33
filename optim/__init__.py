"""Optimizers: update parameters by adding optimizer ops; schedulers; gradient clipping."""
from .adam import Adam, AdamW
from .adaptive import Adadelta, Adagrad, Adamax, Lamb, RMSProp
from .clip import (
    ClipGradByGlobalNorm,
    ClipGradByNorm,
    ClipGradByValue,
    clip_grad_norm,
    clip_grad_value,
)
from .lr_scheduler import CosineAnnealing, LinearWarmup, LRScheduler, StepDecay
from .momentum import Momentum
from .optimizer import Optimizer, preparable
from .sgd import SGD

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "ClipGradByGlobalNorm",
           "ClipGradByNorm", "ClipGradByValue", "CosineAnnealing", "LRScheduler", "Lamb",
           "LinearWarmup", "Momentum", "Optimizer", "RMSProp", "StepDecay", "clip_grad_norm",
           "clip_grad_value", "preparable"]
