"""Linear: a fully connected layer, emitted as Paddle's fc ops (mul, elementwise_add, act)."""
from __future__ import annotations

import tape
from tape.errors import InvalidArgumentError
from tape.variable import Variable, unique_name

from .layer import Layer, activation, constant, float_dtype, xavier_uniform


class Linear(Layer):
    """A fully connected layer: ``y = act(x @ w + b)`` over the last dim of ``x``.

    Args:
        in_dim: size of the last dim of ``x``.
        out_dim: size of the last dim of ``y``.
        act: name of a registered unary op applied last (``"relu"``, ``"tanh"``, ...), or None.
        dtype: floating dtype of the parameters and of the ``x`` it takes.

    Shapes: ``x`` (..., in_dim) of rank >= 2 -> ``y`` (..., out_dim). Parameters (``params()``):
    ``w`` (in_dim, out_dim), Xavier/Glorot uniform in ``[-l, l]`` with
    ``l = sqrt(6 / (in_dim + out_dim))``, and ``b`` (out_dim,), zeros; named Paddle-style
    (``linear_0.w_0``, ``linear_0.b_0``), persistable, with stop_gradient=False. Each call adds
    ``mul`` (x_num_col_dims = x.ndim - 1), ``elementwise_add`` (axis = x.ndim - 1) and ``act``
    to the global tape, as Paddle's fc does.

    >>> layer = Linear(3, 2, act="relu")
    >>> layer(tape.Variable(np.ones((4, 3), np.float32))).shape
    (4, 2)
    """

    def __init__(self, in_dim: int, out_dim: int, act: str | None = None,
                 dtype="float32"):
        code = float_dtype("Linear", dtype)
        self.in_dim, self.out_dim, self.act = in_dim, out_dim, act
        self._act = activation("Linear", act)
        prefix = unique_name("linear")
        self.w = xavier_uniform(f"{prefix}.w_0", (in_dim, out_dim), code, in_dim, out_dim)
        self.b = constant(f"{prefix}.b_0", (out_dim,), code)

    def __call__(self, x: Variable) -> Variable:
        shape = x.shape
        rank = len(shape)
        if rank < 2 or shape[-1] not in (self.in_dim, -1):
            raise InvalidArgumentError(f"Linear: expected x of shape (..., {self.in_dim}) with "
                                       f"rank >= 2, received {tuple(shape)}")
        # mul's attributes default to x_num_col_dims=1, y_num_col_dims=1: given only where they
        # differ, a matrix's call has none to pass and hash (0.5 us of a small layer's call)
        h = tape.ops.mul(x, self.w) if rank == 2 else \
            tape.ops.mul(x, self.w, x_num_col_dims=rank - 1)
        h = tape.ops.elementwise_add(h, self.b, axis=rank - 1)
        return h if self._act is None else self._act(h)

    def __repr__(self):
        return f"Linear({self.in_dim}, {self.out_dim}, act={self.act!r}, dtype={self.w.dtype})"
