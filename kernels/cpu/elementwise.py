"""elementwise_add / sub / mul / div / max and their gradients."""
import numpy as np

from tape.registry import kernel

from .broadcast import aligned, grad_shapes, unbroadcast, unbroadcast_product


@kernel("elementwise_add")
def elementwise_add(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x + y


@kernel("elementwise_sub")
def elementwise_sub(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x - y


@kernel("elementwise_mul")
def elementwise_mul(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x * y


@kernel("elementwise_div")
def elementwise_div(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return x / y


@kernel("elementwise_add_grad")
def elementwise_add_grad(X, Y, dOut, axis, wants):
    xs, ys = grad_shapes(X, Y, axis)
    dx = unbroadcast(dOut, X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast(dOut, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_sub_grad")
def elementwise_sub_grad(X, Y, dOut, axis, wants):
    xs, ys = grad_shapes(X, Y, axis)
    dx = unbroadcast(dOut, X.shape, xs) if "X@GRAD" in wants else None
    dy = -unbroadcast(dOut, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_mul_grad")
def elementwise_mul_grad(X, Y, dOut, axis, wants):
    xs, ys = grad_shapes(X, Y, axis)
    dx = unbroadcast_product(dOut, Y.reshape(ys), X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast_product(dOut, X.reshape(xs), Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_div_grad")
def elementwise_div_grad(X, Y, Out, dOut, axis, wants):
    xs, ys = grad_shapes(X, Y, axis)
    y = Y.reshape(ys)
    dx = unbroadcast(dOut / y, X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast(-dOut * Out / y, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy


@kernel("elementwise_max")
def elementwise_max(X, Y, axis):
    x, y = aligned(X, Y, axis)
    return np.maximum(x, y)


@kernel("elementwise_max_grad")
def elementwise_max_grad(X, Y, dOut, axis, wants):
    xs, ys = grad_shapes(X, Y, axis)
    x_wins = X.reshape(xs) > Y.reshape(ys)     # ties go to Y, as in Paddle
    dx = unbroadcast(dOut * x_wins, X.shape, xs) if "X@GRAD" in wants else None
    dy = unbroadcast(dOut * ~x_wins, Y.shape, ys) if "Y@GRAD" in wants else None
    return dx, dy
