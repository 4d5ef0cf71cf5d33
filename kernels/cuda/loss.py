"""cross_entropy and softmax_with_cross_entropy on the GPU: one thread per row, forward (softmax,
its log-sum-exp and the loss in one pass) and gradient.

Rows run along the class axis of the logits viewed as (outer, classes, inner); hard labels are
viewed as (outer, 1, inner) and the loss as (outer, inner), which are their flat orders. A hard
label that is neither a class nor ignore_index lowers a flag to its row with ``atomic.min``; the
host then raises the CPU kernel's error.
"""
import math

from numba import cuda

from ..cpu.loss import _label_error
from .activation import around_axis, softmax_grad_rows, softmax_row
from .device import array_module, bad_flag, cuda_kernel, first_bad, launch


@cuda.jit
def _hard_loss_rows(x, labels, use_softmax, ignore_index, softmax, loss, bad):
    """With use_softmax: softmax of each row and loss = lse - x[label]; without, x holds
    probabilities and loss = -log(x[label]). 0 where the label is ignore_index."""
    outer, classes, inner = x.shape
    for row in range(cuda.grid(1), outer * inner, cuda.gridsize(1)):
        o, i = row // inner, row % inner
        lse = softmax_row(x, o, i, softmax) if use_softmax else 0.0
        label = labels[o, 0, i]
        if label == ignore_index:
            loss[o, i] = 0.0
        elif 0 <= label < classes:
            loss[o, i] = lse - x[o, label, i] if use_softmax else -math.log(x[o, label, i])
        else:
            loss[o, i] = 0.0
            cuda.atomic.min(bad, 0, row)


@cuda.jit
def _soft_loss_rows(x, labels, use_softmax, softmax, loss):
    """With use_softmax: softmax of each row and loss = sum(labels * (lse - x)); without,
    loss = -sum(labels * log(x))."""
    outer, classes, inner = x.shape
    for row in range(cuda.grid(1), outer * inner, cuda.gridsize(1)):
        o, i = row // inner, row % inner
        total = 0.0
        if use_softmax:
            lse = softmax_row(x, o, i, softmax)
            for j in range(classes):
                total += labels[o, j, i] * (lse - x[o, j, i])
        else:
            for j in range(classes):
                total -= labels[o, j, i] * math.log(x[o, j, i])
        loss[o, i] = total


@cuda.jit
def _hard_loss_grad_rows(softmax, labels, dloss, use_softmax, ignore_index, dlogits, bad):
    """With use_softmax: (softmax - onehot(label)) * dloss; without, softmax holds probabilities
    and the gradient is -dloss / p at the label. 0 in ignored rows."""
    outer, classes, inner = softmax.shape
    for row in range(cuda.grid(1), outer * inner, cuda.gridsize(1)):
        o, i = row // inner, row % inner
        label = labels[o, 0, i]
        keep = label != ignore_index
        if keep and not 0 <= label < classes:
            cuda.atomic.min(bad, 0, row)
            keep = False
        g = dloss[o, i] if keep else 0.0
        for j in range(classes):
            dlogits[o, j, i] = softmax[o, j, i] * g if use_softmax else 0.0
        if keep:
            if use_softmax:
                dlogits[o, label, i] -= g
            else:
                dlogits[o, label, i] = -g / softmax[o, label, i]


@cuda.jit
def _soft_loss_grad_rows(softmax, labels, dloss, use_softmax, dlogits):
    """With use_softmax: dloss * (softmax * sum(labels) - labels), exact for any label sums;
    without, -dloss * labels / p."""
    outer, classes, inner = softmax.shape
    for row in range(cuda.grid(1), outer * inner, cuda.gridsize(1)):
        o, i = row // inner, row % inner
        g = dloss[o, i]
        if use_softmax:
            total = 0.0
            for j in range(classes):
                total += labels[o, j, i]
            for j in range(classes):
                dlogits[o, j, i] = g * (softmax[o, j, i] * total - labels[o, j, i])
        else:
            for j in range(classes):
                dlogits[o, j, i] = -g * labels[o, j, i] / softmax[o, j, i]


def _labels(Label, logits, soft_label):
    """Soft labels as (outer, classes, inner) like the logits; hard ones as (outer, 1, inner)."""
    xp = array_module(Label)
    if soft_label:
        return xp.ascontiguousarray(Label).reshape(logits.shape)
    return xp.ascontiguousarray(Label).reshape(logits.shape[0], 1, logits.shape[2])


def _raise_if_bad(op, flag, labels, classes, ignore_index):
    row = first_bad(flag, labels.size)
    if row >= 0:
        raise _label_error(op, int(labels.reshape(-1)[row]), classes, ignore_index)


def _loss(op, logits, labels, soft_label, use_softmax, ignore_index, softmax):
    """The per-row loss (outer, inner) of ``logits`` (outer, classes, inner), writing the
    softmax into ``softmax`` when ``use_softmax``."""
    xp = array_module(logits)
    outer, classes, inner = logits.shape
    loss = xp.empty((outer, inner), logits.dtype)
    if soft_label:
        launch(_soft_loss_rows, outer * inner, logits, labels, use_softmax, softmax, loss)
    else:
        flag = bad_flag(xp, outer * inner)
        launch(_hard_loss_rows, outer * inner, logits, labels, use_softmax, ignore_index,
               softmax, loss, flag)
        _raise_if_bad(op, flag, labels, classes, ignore_index)
    return loss


def _loss_grad(op, probs, labels, dloss, soft_label, use_softmax, ignore_index):
    xp = array_module(probs, dloss)
    outer, classes, inner = probs.shape
    dloss = xp.ascontiguousarray(dloss).reshape(outer, inner)
    dlogits = xp.empty_like(probs)
    if soft_label:
        launch(_soft_loss_grad_rows, outer * inner, probs, labels, dloss, use_softmax, dlogits)
    else:
        flag = bad_flag(xp, outer * inner)
        launch(_hard_loss_grad_rows, outer * inner, probs, labels, dloss, use_softmax,
               ignore_index, dlogits, flag)
        _raise_if_bad(op, flag, labels, classes, ignore_index)
    return dlogits


@cuda_kernel("cross_entropy")
def cross_entropy(X, Label, soft_label, ignore_index):
    probs = around_axis(X, -1)
    labels = _labels(Label, probs, soft_label)
    loss = _loss("cross_entropy", probs, labels, soft_label, False, ignore_index, probs)
    # hard labels may come without the trailing 1 (Paddle): Y then has Label's shape
    return loss.reshape(Label.shape if Label.ndim < X.ndim else X.shape[:-1] + (1,))


@cuda_kernel("cross_entropy_grad")
def cross_entropy_grad(X, Label, dY, soft_label, ignore_index):
    probs = around_axis(X, -1)
    dprobs = _loss_grad("cross_entropy_grad", probs, _labels(Label, probs, soft_label), dY,
                        soft_label, False, ignore_index)
    return dprobs.reshape(X.shape)


@cuda_kernel("softmax_with_cross_entropy")
def softmax_with_cross_entropy(Logits, Label, soft_label, use_softmax, ignore_index, axis):
    logits = around_axis(Logits, axis)
    # Without use_softmax, Softmax is the input itself (probabilities), copied.
    softmax = array_module(logits).empty_like(logits) if use_softmax else logits.copy()
    loss = _loss("softmax_with_cross_entropy", logits, _labels(Label, logits, soft_label),
                 soft_label, use_softmax, ignore_index, softmax)
    loss_shape = list(Logits.shape)
    loss_shape[axis] = 1
    return softmax.reshape(Logits.shape), loss.reshape(loss_shape)


@cuda_kernel("softmax_with_cross_entropy_grad")
def softmax_with_cross_entropy_grad(Label, Softmax, dLoss, dSoftmax, soft_label, use_softmax,
                                    ignore_index, axis):
    softmax = around_axis(Softmax, axis)
    dlogits = _loss_grad("softmax_with_cross_entropy_grad", softmax,
                         _labels(Label, softmax, soft_label), dLoss, soft_label, use_softmax,
                         ignore_index)
    if dSoftmax is not None:   # Softmax itself fed the loss too (Paddle drops this gradient)
        ds = around_axis(dSoftmax, axis)
        if use_softmax:
            through = array_module(ds).empty_like(ds)
            launch(softmax_grad_rows, ds.shape[0] * ds.shape[2], softmax, ds, through, False)
            ds = through
        dlogits += ds
    return dlogits.reshape(Softmax.shape)
