"""cross_entropy and softmax_with_cross_entropy kernels, on 2-D rows with the classes last.

Losses of probabilities are a few numpy passes. softmax_with_cross_entropy, the loss of every
classifier, takes the softmax rows of the activation family, which also give each row's
log-sum-exp (so the loss never takes the log of a softmax that may have underflowed), then one
numba pass over the labels. A single numba kernel doing both would use numba's scalar exp:
faster only below about 64x10, 3.5x slower at 256x100.
"""
import numpy as np

from tape.errors import InvalidArgumentError
from tape.registry import kernel

from ..jit import njit
from .activation import as_rows, from_rows, softmax_rows


def _label_error(op: str, value, classes: int, ignore_index: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{op}: Label holds {value}, which is neither a class index in [0, {classes}) nor "
        f"ignore_index={ignore_index}")


def _check_labels(op, labels, classes, ignore_index):
    bad = (labels != ignore_index) & ((labels < 0) | (labels >= classes))
    if bad.any():
        raise _label_error(op, labels[bad][0], classes, ignore_index)


# ---- losses of probabilities (cross_entropy; softmax_with_cross_entropy with use_softmax=False)

def _log_loss(op, probs, labels, soft, ignore_index):
    """Per row: -log(probs[label]) (0 where label == ignore_index) or -sum(labels * log(probs))."""
    if soft:
        return -(labels * np.log(probs)).sum(-1)
    _check_labels(op, labels, probs.shape[1], ignore_index)
    keep = np.flatnonzero(labels != ignore_index)
    loss = np.zeros(len(labels), probs.dtype)
    loss[keep] = -np.log(probs[keep, labels[keep]])
    return loss


def _log_loss_grad(op, probs, labels, dloss, soft, ignore_index):
    if soft:
        return -dloss[:, None] * labels / probs
    _check_labels(op, labels, probs.shape[1], ignore_index)
    keep = np.flatnonzero(labels != ignore_index)
    dprobs = np.zeros_like(probs)
    dprobs[keep, labels[keep]] = -dloss[keep] / probs[keep, labels[keep]]
    return dprobs


def _cross_entropy_rows(X, Label, soft_label):
    return as_rows(X, -1), as_rows(Label, -1) if soft_label else Label.reshape(-1)


@kernel("cross_entropy")
def cross_entropy(X, Label, soft_label, ignore_index):
    probs, labels = _cross_entropy_rows(X, Label, soft_label)
    loss = _log_loss("cross_entropy", probs, labels, soft_label, ignore_index)
    # hard labels may come without the trailing 1 (Paddle): Y then has Label's shape
    return loss.reshape(Label.shape if Label.ndim < X.ndim else X.shape[:-1] + (1,))


@kernel("cross_entropy_grad")
def cross_entropy_grad(X, Label, dY, soft_label, ignore_index):
    probs, labels = _cross_entropy_rows(X, Label, soft_label)
    dprobs = _log_loss_grad("cross_entropy_grad", probs, labels, dY.reshape(-1), soft_label,
                            ignore_index)
    return dprobs.reshape(X.shape)


# ---- softmax_with_cross_entropy ----

@njit
def _hard_softmax_loss(logits, lse, labels, ignore_index, loss):
    """loss[r] = lse[r] - logits[r, labels[r]], 0 where the label is ignore_index.
    Returns the first row whose label is out of range, or -1."""
    classes = logits.shape[1]
    for r in range(labels.size):
        label = labels[r]
        if label == ignore_index:
            loss[r] = 0.0
        elif 0 <= label < classes:
            loss[r] = lse[r] - logits[r, label]
        else:
            return r
    return -1


@njit
def _hard_softmax_loss_grad(softmax, labels, dloss, ignore_index, dlogits):
    """dlogits = (softmax - onehot(labels)) * dloss row by row, 0 in ignored rows.
    Returns the first row whose label is out of range, or -1."""
    rows, classes = softmax.shape
    for r in range(rows):
        label = labels[r]
        if label != ignore_index and not 0 <= label < classes:
            return r
        g = 0.0 if label == ignore_index else dloss[r]
        for j in range(classes):
            dlogits[r, j] = softmax[r, j] * g
        if label != ignore_index:
            dlogits[r, label] -= g
    return -1


def _raise_if_bad(op, bad_row, labels, classes, ignore_index):
    if bad_row >= 0:
        raise _label_error(op, labels[bad_row], classes, ignore_index)


def _is_rows(a, axis) -> bool:
    """Whether ``a`` already is what ``as_rows`` makes of it (a classifier's (N, C) logits):
    the common case skips its calls (a few us of a small step's loss)."""
    return a.ndim == 2 and axis % 2 == 1 and a.flags.c_contiguous


@kernel("softmax_with_cross_entropy")
def softmax_with_cross_entropy(Logits, Label, soft_label, use_softmax, ignore_index, axis):
    op = "softmax_with_cross_entropy"
    if use_softmax and not soft_label and _is_rows(Logits, axis):
        softmax, lse = softmax_rows(Logits)
        loss = np.empty((Logits.shape[0], 1), Logits.dtype)
        labels = Label.reshape(-1)
        bad = _hard_softmax_loss(Logits, lse, labels, ignore_index, loss.reshape(-1))
        _raise_if_bad(op, bad, labels, Logits.shape[1], ignore_index)
        return softmax, loss
    logits = as_rows(Logits, axis)
    # hard labels and Loss have 1 at axis, so their rows are their flat order: no move needed
    labels = as_rows(Label, axis) if soft_label else Label.reshape(-1)
    loss_shape = list(Logits.shape)
    loss_shape[axis] = 1
    if not use_softmax:
        softmax = logits.copy()
        loss = _log_loss(op, logits, labels, soft_label, ignore_index)
    elif soft_label:
        softmax, lse = softmax_rows(logits)
        loss = (labels * (lse[:, None] - logits)).sum(-1).astype(logits.dtype, copy=False)
    else:
        softmax, lse = softmax_rows(logits)
        loss = np.empty(len(labels), logits.dtype)
        bad = _hard_softmax_loss(logits, lse, labels, ignore_index, loss)
        _raise_if_bad(op, bad, labels, logits.shape[1], ignore_index)
    return from_rows(softmax, Logits.shape, axis), loss.reshape(loss_shape)


@kernel("softmax_with_cross_entropy_grad")
def softmax_with_cross_entropy_grad(Label, Softmax, dLoss, dSoftmax, soft_label, use_softmax,
                                    ignore_index, axis):
    op = "softmax_with_cross_entropy_grad"
    rows = _is_rows(Softmax, axis)
    softmax = Softmax if rows else as_rows(Softmax, axis)
    labels = as_rows(Label, axis) if soft_label else Label.reshape(-1)
    dloss = dLoss.reshape(-1)
    if not use_softmax:
        dlogits = _log_loss_grad(op, softmax, labels, dloss, soft_label, ignore_index)
    elif soft_label:
        # exact for any label sums; Paddle's (softmax - labels) assumes they sum to 1
        dlogits = dloss[:, None] * (softmax * labels.sum(-1, keepdims=True) - labels)
    else:
        dlogits = np.empty_like(softmax)
        bad = _hard_softmax_loss_grad(softmax, labels, dloss, ignore_index, dlogits)
        _raise_if_bad(op, bad, labels, softmax.shape[1], ignore_index)
    if dSoftmax is not None:   # Softmax itself fed the loss too (Paddle drops this gradient)
        ds = as_rows(dSoftmax, axis)
        if use_softmax:
            ds = softmax * (ds - (ds * softmax).sum(-1, keepdims=True))
        dlogits = dlogits + ds
    return dlogits if rows else from_rows(dlogits, Softmax.shape, axis)
