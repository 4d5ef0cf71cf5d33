"""References for batch_norm and layer_norm: numpy means and variances over the reduced axes."""
import numpy as np


def batch_norm(X, Mean, Variance, momentum, epsilon, data_layout, is_test, use_global_stats,
               trainable_statistics, Scale=None, Bias=None, MomentumTensor=None):
    channel_axis = 1 if data_layout == "NCHW" else X.ndim - 1
    reduced = tuple(i for i in range(X.ndim) if i != channel_axis)
    along_channels = [1] * X.ndim
    along_channels[channel_axis] = -1
    if (is_test and not trainable_statistics) or use_global_stats:
        mean, variance = Mean, Variance
        mean_out, variance_out = Mean, Variance
    else:
        if MomentumTensor is not None:
            momentum = MomentumTensor.item()
        mean, variance = X.mean(axis=reduced), X.var(axis=reduced)
        mean_out = momentum * Mean + (1 - momentum) * mean
        variance_out = momentum * Variance + (1 - momentum) * variance
    scale = np.ones_like(Mean) if Scale is None else Scale
    bias = np.zeros_like(Mean) if Bias is None else Bias
    x_hat = (X - mean.reshape(along_channels)) / np.sqrt(variance.reshape(along_channels)
                                                         + epsilon)
    y = x_hat * scale.reshape(along_channels) + bias.reshape(along_channels)
    return y.astype(X.dtype), mean_out.astype(X.dtype), variance_out.astype(X.dtype)


def layer_norm(X, epsilon, begin_norm_axis, Scale=None, Bias=None):
    rows = X.reshape(int(np.prod(X.shape[:begin_norm_axis])), -1)
    mean = rows.mean(axis=1, keepdims=True)
    variance = rows.var(axis=1, keepdims=True)
    y = (rows - mean) / np.sqrt(variance + epsilon)
    if Scale is not None:
        y = y * Scale
    if Bias is not None:
        y = y + Bias
    return y.reshape(X.shape).astype(X.dtype)


def group_norm(X, epsilon, groups, data_layout, Scale=None, Bias=None):
    x = np.moveaxis(X, -1, 1) if data_layout == "NHWC" else X
    channels = x.shape[1]
    rows = x.reshape(x.shape[0] * groups, -1)
    y = (rows - rows.mean(axis=1, keepdims=True)) / np.sqrt(rows.var(axis=1, keepdims=True)
                                                           + epsilon)
    y = y.reshape(x.shape)
    along_channels = (1, channels) + (1,) * (x.ndim - 2)
    if Scale is not None:
        y = y * Scale.reshape(along_channels)
    if Bias is not None:
        y = y + Bias.reshape(along_channels)
    return (np.moveaxis(y, 1, -1) if data_layout == "NHWC" else y).astype(X.dtype)


def instance_norm(X, epsilon, Scale=None, Bias=None):
    return group_norm(X, epsilon, X.shape[1], "NCHW", Scale, Bias)
