"""Dropout: zero random elements while training."""
from __future__ import annotations

import tape
from tape.errors import InvalidArgumentError
from tape.variable import Variable

from .layer import Layer

_MODES = ("upscale_in_train", "downgrade_in_infer")


class Dropout(Layer):
    """Zeroes each element with probability ``p`` while training (Paddle's ``dropout`` op).

    ``mode="upscale_in_train"``: training ``y = x * mask / (1 - p)``, eval ``y = x`` (x itself,
    no op). ``mode="downgrade_in_infer"``: training ``y = x * mask``, eval ``y = x * (1 - p)``.
    ``mask`` is 1 with probability ``1 - p``, drawn afresh each call from the process generator
    (``tape.seed(n)`` makes it repeatable); ``p = 0`` returns x itself.

    Args:
        p: probability of dropping an element, in [0, 1].
        mode: ``"upscale_in_train"`` or ``"downgrade_in_infer"``.

    Shapes: x of any shape -> y of the same shape. No parameters.

    >>> drop, x = Dropout(0.5), tape.Variable(np.ones((2, 4), np.float32))
    >>> y = drop(x)                # each element 0 or 2
    >>> drop.eval()(x) is x
    True
    """

    def __init__(self, p: float = 0.5, mode: str = "upscale_in_train"):
        if not 0.0 <= p <= 1.0:
            raise InvalidArgumentError(f"Dropout: p must be in [0, 1], received {p!r}")
        if mode not in _MODES:
            raise InvalidArgumentError(f"Dropout: mode must be one of {list(_MODES)}, received "
                                       f"{mode!r}")
        self.p, self.mode = float(p), mode

    def __call__(self, x: Variable) -> Variable:
        if self.p == 0.0 or (not self.training and self.mode == "upscale_in_train"):
            return x
        return tape.ops.dropout(x, dropout_prob=self.p, is_test=not self.training,
                                dropout_implementation=self.mode)

    def __repr__(self):
        return f"Dropout(p={self.p}, mode={self.mode!r})"
