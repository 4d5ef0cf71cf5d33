"""Normalisation: batch_norm (per channel, over the batch), layer_norm (per sample), group_norm
(per sample and group of channels) and instance_norm (per sample and channel)."""
import math

import numpy as np

from ..attribute import BOOLEAN, FLOAT, INT, STRING, AtLeast, Attr, InRange, OneOf
from ..norm_stats import uses_global_stats
from ..registry import GradOp, Slot, register_op
from .rules import fmt, require_float, require_same_dtype

# Paddle checks epsilon <= 0.001f in float32, the attribute's type: a model saved with 1e-3
# reads back as float32(1e-3), which a float64 bound would reject
_EPSILON = Attr("epsilon", FLOAT, 1e-5, "added to the variance before the square root",
                check=InRange(0.0, float(np.float32(1e-3))))


def _require_vector(ctx, slot: str, length: int, what: str) -> None:
    """``slot``, when given, must be a 1-D vector of ``length`` (-1: unknown) with X's dtype."""
    if not ctx.has_input(slot):
        return
    require_same_dtype(ctx, "X", slot)
    shape = ctx.input(slot).shape
    if len(shape) != 1 or (shape[0] != length and -1 not in (shape[0], length)):
        raise ctx.error(f"{slot} must have shape ({length},) ({what}), received {fmt(shape)}")


# ---- batch_norm ----

def _global_stats(attrs) -> bool:
    return uses_global_stats(attrs["is_test"], attrs["use_global_stats"],
                             attrs["trainable_statistics"])


def _batch_norm_shape(ctx):
    x = ctx.input("X")
    require_float(ctx, "X", x)
    rank, layout = len(x.shape), ctx.attrs["data_layout"]
    if not 2 <= rank <= 5:
        raise ctx.error(f"X must have rank 2 to 5, received {fmt(x.shape)}")
    channel_axis = 1 if layout == "NCHW" else rank - 1
    channels = x.shape[channel_axis]
    what = f"the channels of X {fmt(x.shape)}, data_layout={layout}"
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        _require_vector(ctx, slot, channels, what)
    if ctx.has_input("MomentumTensor"):
        momentum = ctx.input("MomentumTensor")
        require_float(ctx, "MomentumTensor", momentum)
        if -1 not in momentum.shape and math.prod(momentum.shape) != 1:
            raise ctx.error(f"MomentumTensor must hold one element, received shape "
                            f"{fmt(momentum.shape)}")
    values = math.prod(d for i, d in enumerate(x.shape) if i != channel_axis)
    if not _global_stats(ctx.attrs) and values == 1:
        raise ctx.error(f"X {fmt(x.shape)} has 1 value per channel: batch statistics need more "
                        f"(data_layout={layout}); use is_test or use_global_stats for inference")
    for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
        ctx.set_output(slot, (channels,), x.dtype)
    ctx.set_output("Y", x.shape, x.dtype)


def _batch_norm_case(d):
    layout = d.choice(("NCHW", "NHWC"))
    is_test, use_global_stats, trainable = d.boolean(), d.integer(0, 3) == 0, d.boolean()
    attrs = {"is_test": is_test, "use_global_stats": use_global_stats,
             "trainable_statistics": trainable, "data_layout": layout,
             "momentum": d.choice((0.9, 0.5, 0.0, 1.0)), "epsilon": d.choice((1e-5, 1e-3))}
    shape = list(d.shape(2, 5, 1, 3))
    channel_axis = 1 if layout == "NCHW" else len(shape) - 1
    if not _global_stats(attrs) and math.prod(shape) == shape[channel_axis]:
        shape[0] = 2   # batch statistics need two values per channel
    channels = shape[channel_axis]
    # distinct values keep a channel's batch variance away from 0
    inputs = {"X": d.distinct_floats(tuple(shape), 0.1),
              "Mean": d.floats((channels,)), "Variance": d.floats((channels,), 0.2, 2.0)}
    for slot, low in (("Scale", 0.5), ("Bias", -2.0)):
        if d.integer(0, 3) > 0:
            inputs[slot] = d.floats((channels,), low, 2.0)
    if d.integer(0, 3) == 0:
        inputs["MomentumTensor"] = d.floats((1,), 0.0, 1.0)
    return inputs, attrs


register_op(
    "batch_norm",
    inputs=[Slot("X", "input of rank 2-5, channels at axis 1 (NCHW) or last (NHWC)"),
            Slot("Scale", "per-channel scale, (C,); ones if absent", dispensable=True),
            Slot("Bias", "per-channel bias, (C,); zeros if absent", dispensable=True),
            Slot("Mean", "running mean, (C,)"),
            Slot("Variance", "running variance, (C,)"),
            Slot("MomentumTensor", "1-element momentum, instead of the attribute",
                 dispensable=True)],
    outputs=[Slot("Y", "the normalised X"),
             Slot("MeanOut", "updated running mean: the same variable as Mean"),
             Slot("VarianceOut", "updated running variance: the same variable as Variance"),
             Slot("SavedMean", "the mean Y was normalised with, (C,)", intermediate=True),
             Slot("SavedVariance", "1 / sqrt(variance + epsilon) of that normalisation, (C,) "
                                   "(an inverse standard deviation, as Paddle's CPU kernel "
                                   "saves it)", intermediate=True),
             Slot("ReserveSpace", "cuDNN workspace; not written on CPU", dispensable=True,
                  intermediate=True)],
    attrs=[Attr("is_test", BOOLEAN, False, "inference: normalise with Mean and Variance"),
           Attr("momentum", FLOAT, 0.9, "weight of the old running statistics"),
           _EPSILON,
           Attr("data_layout", STRING, "NCHW", "where the channels are",
                check=OneOf("NCHW", "NHWC")),
           Attr("use_global_stats", BOOLEAN, False,
                "normalise with Mean and Variance even when training"),
           Attr("trainable_statistics", BOOLEAN, False,
                "with is_test, still normalise with (and update) batch statistics")],
    infer_shape=_batch_norm_shape,
    grad=GradOp(reads=["X", "Scale", "SavedMean", "SavedVariance"], out_grads=["Y"],
                no_grad=["Mean", "Variance", "MomentumTensor"]),
    case=_batch_norm_case,
    doc="Per channel c, over every other axis: Y = (X - m) / sqrt(v + epsilon) * Scale + Bias. "
        "Training (neither use_global_stats nor is_test without trainable_statistics): m, v are "
        "the batch mean and biased variance, and in place MeanOut = momentum * Mean + "
        "(1 - momentum) * m, VarianceOut = momentum * Variance + (1 - momentum) * v (biased v, "
        "as Paddle's CPU kernel). Otherwise m, v = Mean, Variance, which are left unchanged. "
        "Mean and Variance get no gradient.")


# ---- layer_norm ----

def _layer_norm_shape(ctx):
    x = ctx.input("X")
    require_float(ctx, "X", x)
    axis = ctx.attrs["begin_norm_axis"]
    if axis >= len(x.shape):
        raise ctx.error(f"attribute begin_norm_axis={axis} must be < the rank of X "
                        f"{fmt(x.shape)}")
    rest = x.shape[axis:]
    width = -1 if -1 in rest else math.prod(rest)
    what = f"X {fmt(x.shape)} flattened from begin_norm_axis={axis}"
    for slot in ("Scale", "Bias"):
        _require_vector(ctx, slot, width, what)
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", x.shape[:axis], x.dtype)
    ctx.set_output("Variance", x.shape[:axis], x.dtype)


def _layer_norm_case(d):
    shape = d.shape(2, 4, 1, 4)
    axis = d.integer(1, len(shape) - 1)
    width = math.prod(shape[axis:])
    inputs = {"X": d.floats(shape)}
    for slot, low in (("Scale", 0.5), ("Bias", -2.0)):
        if d.integer(0, 3) > 0:
            inputs[slot] = d.floats((width,), low, 2.0)
    return inputs, {"begin_norm_axis": axis, "epsilon": d.choice((1e-5, 1e-3))}


register_op(
    "layer_norm",
    inputs=[Slot("X", "input; each sample is X flattened from begin_norm_axis"),
            Slot("Scale", "scale of a sample, (prod(X.shape[begin_norm_axis:]),); ones if "
                          "absent", dispensable=True),
            Slot("Bias", "bias of a sample, same shape; zeros if absent", dispensable=True)],
    outputs=[Slot("Y", "the normalised X"),
             Slot("Mean", "mean of each sample, X.shape[:begin_norm_axis]", intermediate=True),
             Slot("Variance", "biased variance of each sample, same shape", intermediate=True)],
    attrs=[_EPSILON,
           Attr("begin_norm_axis", INT, 1, "the first axis normalised over", check=AtLeast(1))],
    infer_shape=_layer_norm_shape,
    grad=GradOp(reads=["X", "Scale"]),
    case=_layer_norm_case,
    doc="Each sample x (X flattened to rows from begin_norm_axis): "
        "Y = (x - mean(x)) / sqrt(var(x) + epsilon) * Scale + Bias, var biased.")


# ---- group_norm and instance_norm: per sample, over groups of channels ----

def _grouped_norm_shape(ctx, groups: int, channel_axis: int, stats: tuple, per_sample) -> None:
    """The rule both share: X of rank 2-5 with ``groups`` dividing its channels; Scale and
    Bias per channel; Y like X and the statistics in ``stats`` of shape ``per_sample(N)``."""
    x = ctx.input("X")
    require_float(ctx, "X", x)
    if not 2 <= len(x.shape) <= 5:
        raise ctx.error(f"X must have rank 2 to 5 (N, C, ...), received {fmt(x.shape)}")
    channels = x.shape[channel_axis]
    if channels >= 0 and (groups < 1 or channels % groups):
        raise ctx.error(f"attribute groups={groups} must be >= 1 and divide the {channels} "
                        f"channels of X {fmt(x.shape)}")
    for slot in ("Scale", "Bias"):
        _require_vector(ctx, slot, channels, f"the channels of X {fmt(x.shape)}")
    ctx.set_output("Y", x.shape, x.dtype)
    for slot in stats:
        ctx.set_output(slot, per_sample(x.shape[0]), x.dtype)


def _group_norm_shape(ctx):
    groups, layout = ctx.attrs["groups"], ctx.attrs["data_layout"]
    rank = len(ctx.input("X").shape)
    _grouped_norm_shape(ctx, groups, 1 if layout == "NCHW" else rank - 1, ("Mean", "Variance"),
                        lambda n: (n, groups))


def _instance_norm_shape(ctx):
    x = ctx.input("X")
    channels = x.shape[1] if len(x.shape) > 1 else -1
    _grouped_norm_shape(ctx, max(channels, 1), 1, ("SavedMean", "SavedVariance"),
                        lambda n: (-1 if -1 in (n, channels) else n * channels,))


def _grouped_norm_case(d, channels: int, group_size: int, channels_last: bool):
    """X (N, C, *spatial) or (N, *spatial, C) with at least two values per normalised group of
    ``group_size`` channels, all distinct (a group's variance stays away from 0), and optional
    Scale and Bias."""
    spatial = [d.integer(1, 3) for _ in range(d.integer(0, 2))]
    if group_size * math.prod(spatial) < 2:
        spatial.append(2)
    shape = (d.integer(1, 2), *spatial, channels) if channels_last else \
        (d.integer(1, 2), channels, *spatial)
    inputs = {"X": d.distinct_floats(shape, 0.1)}
    for slot, low in (("Scale", 0.5), ("Bias", -2.0)):
        if d.integer(0, 3) > 0:
            inputs[slot] = d.floats((channels,), low, 2.0)
    return inputs


def _group_norm_case(d):
    layout, groups, group_size = d.choice(("NCHW", "NHWC")), d.integer(1, 3), d.integer(1, 2)
    inputs = _grouped_norm_case(d, groups * group_size, group_size, layout == "NHWC")
    return inputs, {"groups": groups, "data_layout": layout,
                    "epsilon": d.choice((1e-5, 1e-3))}


def _instance_norm_case(d):
    return _grouped_norm_case(d, d.integer(1, 3), 1, False), {"epsilon": d.choice((1e-5, 1e-3))}


_PER_CHANNEL = [Slot("Scale", "per-channel scale, (C,); ones if absent", dispensable=True),
                Slot("Bias", "per-channel bias, (C,); zeros if absent", dispensable=True)]

register_op(
    "group_norm",
    inputs=[Slot("X", "input of rank 2-5, channels at axis 1 (NCHW) or last (NHWC)"),
            *_PER_CHANNEL],
    outputs=[Slot("Y", "the normalised X"),
             Slot("Mean", "mean of each sample's group, (N, groups)", intermediate=True),
             Slot("Variance", "biased variance of each sample's group, (N, groups)",
                  intermediate=True)],
    attrs=[_EPSILON,
           # Paddle's proto default is -1, which its shape rule rejects: groups must be given
           Attr("groups", INT, -1, "channel groups (>= 1, dividing C)"),
           Attr("data_layout", STRING, "NCHW", "where the channels are",
                check=OneOf("NCHW", "NHWC"))],
    infer_shape=_group_norm_shape,
    grad=GradOp(reads=["X", "Scale"]),
    case=_group_norm_case,
    doc="Each sample's channels split into groups of C / groups; each group g of sample n "
        "(its channels and every spatial position): Y = (X - Mean[n, g]) / sqrt(Variance[n, g] "
        "+ epsilon) * Scale[c] + Bias[c], Variance biased.")

register_op(
    "instance_norm",
    inputs=[Slot("X", "input of rank 2-5, (N, C, ...)"), *_PER_CHANNEL],
    outputs=[Slot("Y", "the normalised X"),
             Slot("SavedMean", "mean of each (sample, channel), (N * C,)", intermediate=True),
             Slot("SavedVariance", "1 / sqrt(variance + epsilon) of each (sample, channel), "
                                   "(N * C,) (an inverse standard deviation, as Paddle saves it)",
                  intermediate=True)],
    attrs=[_EPSILON],
    infer_shape=_instance_norm_shape,
    grad=GradOp(reads=["X", "Scale"]),
    case=_instance_norm_case,
    doc="Each (sample n, channel c) over its spatial positions: Y = (X - mean) / sqrt(var + "
        "epsilon) * Scale[c] + Bias[c], var biased: group_norm with one channel per group.")
