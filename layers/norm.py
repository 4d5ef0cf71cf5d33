"""BatchNorm, LayerNorm, GroupNorm and InstanceNorm2D: normalisation layers over Paddle's
batch_norm, layer_norm, group_norm and instance_norm ops."""
from __future__ import annotations

import math

import tape
from tape.errors import InvalidArgumentError
from tape.variable import Variable, unique_name

from .layer import Layer, activation, constant, float_dtype


def _buffer(name: str, shape, dtype: int, value: float) -> Variable:
    """A persistable Variable that is saved with the parameters but never trained."""
    v = constant(name, shape, dtype, value)
    v.stop_gradient = True
    return v


class BatchNorm(Layer):
    """Batch normalisation over every axis but the channels, with running statistics.

    Per channel c: ``y = (x - m) / sqrt(v + epsilon) * weight + bias``, then ``act``. While
    training, ``m`` and ``v`` are the mean and (biased) variance of the batch, and the running
    statistics move towards them: ``mean = momentum * mean + (1 - momentum) * m``, likewise
    ``variance``. In eval mode ``m`` and ``v`` are the running statistics, left unchanged.

    Args:
        num_channels: C, the size of x's channel axis.
        momentum: weight of the old running statistics in each update.
        epsilon: added to the variance.
        act: name of a registered unary op applied last (``"relu"``, ...), or None.
        data_layout: ``"NCHW"`` (channels at axis 1) or ``"NHWC"`` (channels last).
        dtype: floating dtype of the parameters and of the x it takes.

    Shapes: x of rank 2-5, (N, C, ...) or (N, ..., C) -> y of the same shape. Parameters:
    ``weight`` (C,), ones, and ``bias`` (C,), zeros (``batch_norm_0.w_0``, ``batch_norm_0.b_0``).
    Running ``mean`` (C,), zeros, and ``variance`` (C,), ones (``batch_norm_0.w_1``,
    ``batch_norm_0.w_2``) are persistable but not trainable: ``buffers()`` lists them,
    ``state_dict()`` saves them, ``params()`` leaves them out. Each call adds one
    ``batch_norm`` op whose MeanOut and VarianceOut are the running statistics themselves.

    >>> bn = BatchNorm(3)
    >>> y = bn(tape.Variable(np.random.rand(8, 3, 4, 4).astype(np.float32)))
    >>> bn.eval()(tape.Variable(np.ones((1, 3, 4, 4), np.float32))).shape
    (1, 3, 4, 4)
    """

    def __init__(self, num_channels: int, momentum: float = 0.9, epsilon: float = 1e-5,
                 act: str | None = None, data_layout: str = "NCHW", dtype="float32"):
        code = float_dtype("BatchNorm", dtype)
        if data_layout not in ("NCHW", "NHWC"):
            raise InvalidArgumentError(f"BatchNorm: data_layout must be 'NCHW' or 'NHWC', "
                                       f"received {data_layout!r}")
        self.num_channels, self.momentum, self.epsilon = num_channels, momentum, epsilon
        self.act, self.data_layout = act, data_layout
        self._act = activation("BatchNorm", act)
        prefix = unique_name("batch_norm")
        shape = (num_channels,)
        self.weight = constant(f"{prefix}.w_0", shape, code, 1.0)
        self.bias = constant(f"{prefix}.b_0", shape, code, 0.0)
        self.mean = _buffer(f"{prefix}.w_1", shape, code, 0.0)
        self.variance = _buffer(f"{prefix}.w_2", shape, code, 1.0)

    def buffers(self) -> list[Variable]:
        """The running statistics: persistable, not trained."""
        return [self.mean, self.variance]

    def __call__(self, x: Variable) -> Variable:
        rank = len(x.shape)
        axis = 1 if self.data_layout == "NCHW" else rank - 1
        if not 2 <= rank <= 5 or x.shape[axis] not in (self.num_channels, -1):
            raise InvalidArgumentError(
                f"BatchNorm: expected x of rank 2-5 with {self.num_channels} channels at axis "
                f"{'1' if self.data_layout == 'NCHW' else '-1'} ({self.data_layout}), received "
                f"shape {tuple(x.shape)}")
        outs = tape.get_global_tape().add_op(
            "batch_norm",
            {"X": [x], "Scale": [self.weight], "Bias": [self.bias], "Mean": [self.mean],
             "Variance": [self.variance]},
            {"MeanOut": [self.mean], "VarianceOut": [self.variance]},
            {"is_test": not self.training, "momentum": self.momentum, "epsilon": self.epsilon,
             "data_layout": self.data_layout})
        y = outs["Y"][0]
        return y if self._act is None else self._act(y)

    def __repr__(self):
        return (f"BatchNorm({self.num_channels}, momentum={self.momentum}, "
                f"epsilon={self.epsilon}, act={self.act!r}, data_layout={self.data_layout!r})")


class LayerNorm(Layer):
    """Layer normalisation over the trailing ``normalized_shape`` axes of each sample.

    Each sample s (x's trailing axes): ``y = (s - mean(s)) / sqrt(var(s) + epsilon) * weight
    + bias``, var biased; the same in training and eval.

    Args:
        normalized_shape: the trailing shape to normalise over (an int for the last axis).
        epsilon: added to the variance.
        dtype: floating dtype of the parameters and of the x it takes.

    Shapes: x (..., *normalized_shape) with at least one leading axis -> y of the same shape.
    Parameters: ``weight`` (prod(normalized_shape),), ones, and ``bias``, zeros
    (``layer_norm_0.w_0``, ``layer_norm_0.b_0``). Each call adds one ``layer_norm`` op with
    ``begin_norm_axis = x.ndim - len(normalized_shape)``.

    >>> ln = LayerNorm(4)
    >>> ln(tape.Variable(np.arange(8, dtype=np.float32).reshape(2, 4))).value().mean(axis=1)
    array([0., 0.], dtype=float32)
    """

    def __init__(self, normalized_shape, epsilon: float = 1e-5, dtype="float32"):
        code = float_dtype("LayerNorm", dtype)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.normalized_shape, self.epsilon = shape, epsilon
        prefix = unique_name("layer_norm")
        width = (math.prod(shape),)
        self.weight = constant(f"{prefix}.w_0", width, code, 1.0)
        self.bias = constant(f"{prefix}.b_0", width, code, 0.0)

    def __call__(self, x: Variable) -> Variable:
        shape = self.normalized_shape
        count = len(shape)
        trailing = tuple(x.shape[-count:])
        if len(x.shape) <= count or any(a not in (b, -1) for a, b in zip(trailing, shape)):
            raise InvalidArgumentError(
                f"LayerNorm: expected x of shape (..., {', '.join(map(str, shape))}) with at "
                f"least one leading axis, received {tuple(x.shape)}")
        return tape.ops.layer_norm(x, self.weight, self.bias, epsilon=self.epsilon,
                                   begin_norm_axis=len(x.shape) - count)

    def __repr__(self):
        return f"LayerNorm({list(self.normalized_shape)}, epsilon={self.epsilon})"


class GroupNorm(Layer):
    """Group normalisation: each sample's channels in ``num_groups`` groups, each group
    normalised over its channels and positions, then scaled and shifted per channel.

    ``y = (x - mean_g) / sqrt(var_g + epsilon) * weight[c] + bias[c]``, the same in training
    and eval.

    Args:
        num_groups: G, which must divide num_channels.
        num_channels: C, the size of x's channel axis.
        epsilon: added to the variance.
        data_format: ``"NCHW"`` (channels at axis 1) or ``"NHWC"`` (channels last).
        dtype: floating dtype of the parameters and of the x it takes.

    Shapes: x of rank 2-5 -> y of the same shape. Parameters: ``weight`` (C,), ones, and
    ``bias`` (C,), zeros (``group_norm_0.w_0``, ``group_norm_0.b_0``). Each call adds one
    ``group_norm`` op.

    >>> GroupNorm(2, 4)(tape.Variable(np.random.rand(3, 4, 5, 5).astype(np.float32))).shape
    (3, 4, 5, 5)
    """

    def __init__(self, num_groups: int, num_channels: int, epsilon: float = 1e-5,
                 data_format: str = "NCHW", dtype="float32"):
        code = float_dtype("GroupNorm", dtype)
        if num_groups < 1 or num_channels % num_groups or data_format not in ("NCHW", "NHWC"):
            raise InvalidArgumentError(
                f"GroupNorm: expected num_groups >= 1 dividing num_channels and data_format "
                f"'NCHW' or 'NHWC', received num_groups={num_groups}, "
                f"num_channels={num_channels}, data_format={data_format!r}")
        self.num_groups, self.num_channels, self.epsilon = num_groups, num_channels, epsilon
        self.data_format = data_format
        prefix = unique_name("group_norm")
        self.weight = constant(f"{prefix}.w_0", (num_channels,), code, 1.0)
        self.bias = constant(f"{prefix}.b_0", (num_channels,), code, 0.0)

    def __call__(self, x: Variable) -> Variable:
        axis = 1 if self.data_format == "NCHW" else len(x.shape) - 1
        if not 2 <= len(x.shape) <= 5 or x.shape[axis] not in (self.num_channels, -1):
            raise InvalidArgumentError(
                f"GroupNorm: expected x of rank 2-5 with {self.num_channels} channels "
                f"({self.data_format}), received shape {tuple(x.shape)}")
        return tape.ops.group_norm(x, self.weight, self.bias, groups=self.num_groups,
                                   epsilon=self.epsilon, data_layout=self.data_format)

    def __repr__(self):
        return (f"GroupNorm({self.num_groups}, {self.num_channels}, epsilon={self.epsilon}, "
                f"data_format={self.data_format!r})")


class InstanceNorm2D(Layer):
    """Instance normalisation of NCHW images: each (sample, channel) normalised over its
    positions, then scaled and shifted per channel, the same in training and eval.

    ``y = (x - mean) / sqrt(var + epsilon) * weight[c] + bias[c]``.

    Args:
        num_features: C, the channels of x.
        epsilon: added to the variance.
        dtype: floating dtype of the parameters and of the x it takes.

    Shapes: x (N, C, H, W) -> y of the same shape. Parameters: ``weight`` (C,), ones, and
    ``bias`` (C,), zeros (``instance_norm_0.w_0``, ``instance_norm_0.b_0``). Each call adds
    one ``instance_norm`` op.

    >>> InstanceNorm2D(3)(tape.Variable(np.random.rand(2, 3, 4, 4).astype(np.float32))).shape
    (2, 3, 4, 4)
    """

    def __init__(self, num_features: int, epsilon: float = 1e-5, dtype="float32"):
        code = float_dtype("InstanceNorm2D", dtype)
        self.num_features, self.epsilon = num_features, epsilon
        prefix = unique_name("instance_norm")
        self.weight = constant(f"{prefix}.w_0", (num_features,), code, 1.0)
        self.bias = constant(f"{prefix}.b_0", (num_features,), code, 0.0)

    def __call__(self, x: Variable) -> Variable:
        if len(x.shape) != 4 or x.shape[1] not in (self.num_features, -1):
            raise InvalidArgumentError(f"InstanceNorm2D: expected x of shape (N, "
                                       f"{self.num_features}, H, W), received {tuple(x.shape)}")
        return tape.ops.instance_norm(x, self.weight, self.bias, epsilon=self.epsilon)

    def __repr__(self):
        return f"InstanceNorm2D({self.num_features}, epsilon={self.epsilon})"
