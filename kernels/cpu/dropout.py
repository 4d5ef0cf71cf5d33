"""dropout and its gradient: one fused masked-scale pass each.

The uniform draw is float32 whatever X's dtype, so that a seed gives one mask for float32 and
float64 inputs alike.
"""
import numpy as np

from tape.random import generator
from tape.registry import kernel

from .. import formulas
from ..jit import pointwise


def _factor(dropout_prob, upscale):
    """What a kept element is multiplied by while training."""
    if not upscale:
        return 1.0
    return 0.0 if dropout_prob == 1.0 else 1.0 / (1.0 - dropout_prob)


def _rng(Seed, fix_seed, seed):
    if Seed is not None:
        seed = int(Seed.reshape(-1)[0])
    elif not fix_seed:
        seed = 0
    return generator() if seed == 0 else np.random.default_rng(seed)


# out = values * factor where keep, else 0 (flat arrays)
_masked_scale = pointwise(formulas.masked_scale)


def _apply(values, mask, factor):
    out = np.empty(values.shape, values.dtype)
    _masked_scale(np.ascontiguousarray(values).reshape(-1), mask.reshape(-1), out.reshape(-1),
                  (factor,))
    return out


@kernel("dropout")
def dropout(X, Seed, dropout_prob, is_test, dropout_implementation, fix_seed, seed):
    upscale = dropout_implementation == "upscale_in_train"
    if is_test:
        return (X.copy() if upscale else X * X.dtype.type(1.0 - dropout_prob)), None
    draw = _rng(Seed, fix_seed, seed).random(X.shape, dtype=np.float32)
    mask = (draw >= np.float32(dropout_prob)).view(np.uint8)
    return _apply(X, mask, _factor(dropout_prob, upscale)), mask


@kernel("dropout_grad")
def dropout_grad(Mask, dOut, dropout_prob, is_test, dropout_implementation):
    upscale = dropout_implementation == "upscale_in_train"
    if is_test:
        return dOut.copy() if upscale else dOut * dOut.dtype.type(1.0 - dropout_prob)
    return _apply(dOut, Mask, _factor(dropout_prob, upscale))
