"""Layer: the base of every layer — its parameters, its sub-layers, train/eval mode."""
from __future__ import annotations

import math
import re

import tape
from tape import dtypes
from tape.errors import InvalidArgumentError
from tape.registry import REGISTRY
from tape.variable import Variable, unique_name


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


def activation(layer: str, act: str | None):
    """The ``tape.ops`` function of the registered unary op ``act`` (X -> Out, attributes
    defaulted), None for None, or an error naming the layer."""
    if act is None:
        return None
    info = REGISTRY.get(act)
    unary = (info is not None and not act.endswith("_grad")
             and [s.name for s in info.inputs if not s.dispensable] == ["X"]
             and info.visible_outputs == ("Out",) and len(info.defaults) == len(info.attrs))
    if not unary:
        raise InvalidArgumentError(f"{layer}: act={act!r} is not a registered unary op "
                                   f"(X -> Out); expected None or e.g. 'relu', 'tanh', 'sigmoid'")
    return getattr(tape.ops, act)


def float_dtype(layer: str, dtype) -> int:
    """The VarType code of a floating ``dtype`` name, or an error naming the layer."""
    code = dtypes.from_numpy(dtype)
    if code not in dtypes.FLOATING:
        raise InvalidArgumentError(f"{layer}: dtype must be floating, received {dtype!r}")
    return code


class Layer:
    """Owns parameters and sub-layers and adds ops to the global tape when called.

    Every parameter, persistable buffer and sub-layer assigned to an attribute is registered,
    alone or in a (nested) list, tuple or dict (also ``LayerList``, ``ParameterList``,
    ``ParameterDict``): ``params()``, ``state_dict()``, ``to()`` and ``train()`` / ``eval()``
    reach them all, each once, in the order they were set. ``train()`` / ``eval()`` switch
    ``training`` here and below (batch norm and dropout behave differently).

    >>> class Gates(Layer):
    ...     def __init__(self):
    ...         self.W = [self.create_parameter((4, 3)) for _ in "iou"]
    >>> [name for name, _ in Gates().named_parameters()]
    ['W.0', 'W.1', 'W.2']
    """

    training = True

    def named_members(self):
        """``(key, value)`` for each Variable and Layer this layer holds itself, directly or in
        lists, tuples and dicts (keys ``name``, ``name.0``, ``name.key``), each once."""
        seen = set()
        for name, value in vars(self).items():
            for key, member in _held(name, value):
                if id(member) not in seen:
                    seen.add(id(member))
                    yield key, member

    def own_params(self) -> list[Variable]:
        """The parameters this layer itself holds (not its sub-layers')."""
        return [v for _, v in self.named_members() if _is_parameter(v)]

    def sublayers(self) -> list[Layer]:
        return [v for _, v in self.named_members() if isinstance(v, Layer)]

    def full_name(self) -> str:
        """This layer's unique name, Paddle's prefix of its parameters: ``my_layer_0``."""
        name = vars(self).get("_full_name")
        if name is None:
            snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type(self).__name__).lower()
            name = self._full_name = unique_name(snake)
        return name

    def create_parameter(self, shape, dtype="float32", is_bias: bool = False,
                         std: float | None = None) -> Variable:
        """A new parameter of this layer, named as Paddle does (``my_layer_0.w_0``, ``.w_1``,
        ``.b_0``, ...: this layer's ``full_name()``, then a count per kind), initialised as
        Paddle's defaults: zeros for a bias, else Xavier uniform over the first and last dims;
        with ``std``, normal with that standard deviation. Keep it as an attribute, so that
        ``params()`` and ``state_dict()`` find it.

        >>> self.position = self.create_parameter((8, 32), std=0.1)
        """
        shape = tuple(int(n) for n in shape)
        if not shape or min(shape) < 1:
            raise InvalidArgumentError(f"{type(self).__name__}.create_parameter: shape must be "
                                       f"non-empty with sizes >= 1, received {shape}")
        code = float_dtype(f"{type(self).__name__}.create_parameter", dtype)
        kind = "b" if is_bias else "w"
        counts = vars(self).setdefault("_parameter_counts", {})
        counts[kind] = counts.get(kind, -1) + 1
        name = f"{self.full_name()}.{kind}_{counts[kind]}"
        if std is not None:
            return parameter(name, shape, code, "gaussian_random", std=float(std))
        if is_bias:
            return constant(name, shape, code)
        return xavier_uniform(name, shape, code, shape[0], shape[-1])

    def params(self) -> list[Variable]:
        """The trainable parameters here and below, each once (as ``named_parameters``)."""
        return [p for _, p in self.named_parameters()]

    def parameters(self, include_sublayers: bool = True) -> list[Variable]:
        """``params()``, as Paddle and PyTorch call it; only this layer's own without
        ``include_sublayers``."""
        return self.params() if include_sublayers else self.own_params()

    def named_parameters(self, prefix: str = ""):
        """``(key, parameter)`` pairs here and below, keyed as ``state_dict`` keys them
        (``"l1.w"``, ``"W.0"``), each parameter once."""
        for key, v in self._persistables("", set()):
            if _is_parameter(v):
                yield (f"{prefix}.{key}" if prefix else key), v

    def train(self, mode: bool = True) -> Layer:
        self.training = mode
        for layer in self.sublayers():
            layer.train(mode)
        return self

    def eval(self) -> Layer:
        return self.train(False)

    def to(self, place) -> Layer:
        """Move the parameters and persistable buffers here and below to ``place``, in place (the
        same Variables: optimizers keep working); returns this layer.

        >>> model = Linear(64, 10).to(tape.CUDAPlace(0))
        """
        for v in self.state_dict(keep_vars=True).values():
            v.to(place)
        return self

    def state_dict(self, keep_vars: bool = False) -> dict:
        """Parameters and persistable buffers (batch norm's running statistics), here and
        below, by attribute path: ``{"w": ..., "l1.w": ..., "blocks.0.b": ..., "W.0": ...}``,
        each Variable once. Values are copies of the arrays; with ``keep_vars`` the Variables
        themselves."""
        return {key: v if keep_vars else v.value().copy()
                for key, v in self._persistables("", set())}

    def _persistables(self, prefix: str, seen: set):
        """``(key, Variable)`` for the persistable Variables here and below; one held twice
        (tied weights, or a cell whose weights its RNN also holds) keeps its first key."""
        for name, v in self.named_members():
            if isinstance(v, Layer):
                yield from v._persistables(f"{prefix}{name}.", seen)
            elif v.desc.persistable and id(v) not in seen:
                seen.add(id(v))
                yield prefix + name, v

    def load_state_dict(self, state: dict) -> None:
        """Copy ``state`` (as ``state_dict`` returns it) into this layer's Variables in place, so
        optimizers keep pointing at them. Keys, shapes and dtypes must match exactly; all are
        checked before anything changes."""
        where = f"{type(self).__name__}.load_state_dict"
        own = self.state_dict(keep_vars=True)

        def spec(v):
            return f"{v.dtype} {tuple(v.shape)}"
        missing = [f"{k!r} (expected {spec(v.value())})" for k, v in own.items() if k not in state]
        unexpected = [repr(k) for k in state if k not in own]
        if missing or unexpected:
            problems = [f"{what} key(s) {', '.join(keys)}" for what, keys in
                        (("missing", missing), ("unexpected", unexpected)) if keys]
            raise InvalidArgumentError(f"{where}: {'; '.join(problems)}")
        values = {key: v.place.put(state[key]) for key, v in own.items()}
        for key, v in own.items():
            if values[key].shape != v.value().shape or values[key].dtype != v.dtype:
                raise InvalidArgumentError(f"{where}: {key!r} expected {spec(v.value())}, "
                                           f"received {spec(values[key])}")
        for key, v in own.items():
            v.value()[...] = values[key]


def _is_parameter(v) -> bool:
    return isinstance(v, Variable) and not v.stop_gradient and v.desc.persistable


def _held(key: str, value):
    """``(key, member)`` for each Variable or Layer in ``value``, looking into lists, tuples and
    dicts (``key.0``, ``key.name``)."""
    if isinstance(value, (Variable, Layer)):
        yield key, value
    elif isinstance(value, (list, tuple)):
        for i, x in enumerate(value):
            yield from _held(f"{key}.{i}", x)
    elif isinstance(value, dict):
        for name, x in value.items():
            yield from _held(f"{key}.{name}", x)
