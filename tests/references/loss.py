"""References for cross_entropy and softmax_with_cross_entropy, row by row."""
import numpy as np


def _softmax(X, axis):
    e = np.exp(X - X.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _row_losses(probs, labels, soft_label, ignore_index):
    """probs and labels with the classes last; one loss per row."""
    probs = probs.reshape(-1, probs.shape[-1])
    if soft_label:
        return -np.sum(labels.reshape(probs.shape) * np.log(probs), axis=1)
    losses = np.zeros(len(probs))
    for row, label in enumerate(labels.reshape(-1)):
        if label != ignore_index:
            losses[row] = -np.log(probs[row, label])
    return losses


def cross_entropy(X, Label, soft_label, ignore_index):
    y_shape = Label.shape if Label.ndim < X.ndim else X.shape[:-1] + (1,)
    return _row_losses(X, Label, soft_label, ignore_index).reshape(y_shape).astype(X.dtype)


def softmax_with_cross_entropy(Logits, Label, soft_label, use_softmax, numeric_stable_mode,
                               ignore_index, axis):
    probs = _softmax(Logits, axis) if use_softmax else Logits.copy()
    moved_probs = np.moveaxis(probs, axis, -1)
    moved_label = np.moveaxis(Label, axis, -1)
    loss = _row_losses(moved_probs, moved_label, soft_label, ignore_index)
    loss = np.moveaxis(loss.reshape(moved_probs.shape[:-1] + (1,)), -1, axis)
    return probs, loss.astype(Logits.dtype)
