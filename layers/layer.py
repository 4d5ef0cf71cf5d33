"""Layer: the base of every layer — its parameters, its sub-layers, train/eval mode."""
from __future__ import annotations

import math

import tape
from tape import dtypes
from tape.errors import InvalidArgumentError
from tape.variable import Variable


def parameter(name: str, shape, dtype: int, initializer: str, **attrs) -> Variable:
    """A trainable, persistable Variable ``name`` of ``shape``, filled by the op ``initializer``
    (``uniform_random``, ``gaussian_random``, ``fill_constant``) run on a throwaway tape, as in
    the seed design: initialisation is not part of any training tape."""
    p = Variable(name=name, stop_gradient=False)
    p.desc.persistable = True
    tape.Tape().add_op(initializer, {}, {"Out": [p]},
                       {"shape": list(shape), "dtype": dtype, **attrs})
    return p


def xavier_uniform(name, shape, dtype, fan_in: int, fan_out: int) -> Variable:
    """Glorot/Xavier uniform in ``[-l, l]``, ``l = sqrt(6 / (fan_in + fan_out))``."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return parameter(name, shape, dtype, "uniform_random", min=-limit, max=limit)


def kaiming_uniform(name, shape, dtype, fan_in: int) -> Variable:
    """He/Kaiming uniform for ReLU nets in ``[-l, l]``, ``l = sqrt(6 / fan_in)``."""
    limit = math.sqrt(6.0 / fan_in)
    return parameter(name, shape, dtype, "uniform_random", min=-limit, max=limit)


def constant(name, shape, dtype, value: float = 0.0) -> Variable:
    return parameter(name, shape, dtype, "fill_constant", value=float(value))


def float_dtype(layer: str, dtype) -> int:
    """The VarType code of a floating ``dtype`` name, or an error naming the layer."""
    code = dtypes.from_numpy(dtype)
    if code not in dtypes.FLOATING:
        raise InvalidArgumentError(f"{layer}: dtype must be floating, received {dtype!r}")
    return code


class Layer:
    """Owns parameters and sub-layers and adds ops to the global tape when called.

    ``params()`` lists this layer's parameters, then its sub-layers' (attributes that are
    Layers, or lists of them), in the order they were set. ``train()`` / ``eval()`` switch
    ``training`` here and below (batch norm and dropout behave differently).
    """

    training = True

    def own_params(self) -> list[Variable]:
        """The parameters this layer itself holds (not its sub-layers')."""
        return [v for v in vars(self).values()
                if isinstance(v, Variable) and not v.stop_gradient and v.desc.persistable]

    def sublayers(self) -> list[Layer]:
        found = []
        for v in vars(self).values():
            if isinstance(v, Layer):
                found.append(v)
            elif isinstance(v, (list, tuple)):
                found.extend(x for x in v if isinstance(x, Layer))
        return found

    def params(self) -> list[Variable]:
        out = self.own_params()
        for layer in self.sublayers():
            out.extend(layer.params())
        return out

    def train(self, mode: bool = True) -> Layer:
        self.training = mode
        for layer in self.sublayers():
            layer.train(mode)
        return self

    def eval(self) -> Layer:
        return self.train(False)
