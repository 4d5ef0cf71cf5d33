"""Embedding: a trainable lookup table of vectors, over Paddle's lookup_table_v2 op."""
from __future__ import annotations

import tape
from tape.errors import InvalidArgumentError
from tape.variable import Variable, unique_name

from .layer import Layer, float_dtype, xavier_uniform


class Embedding(Layer):
    """Maps integer ids to rows of a trainable table: ``y[i...] = weight[ids[i...]]``.

    Args:
        num_embeddings: V, the number of rows (ids run over [0, V)).
        embedding_dim: D, the width of a row.
        padding_idx: an id whose row is zeros and receives no gradient (a negative value
            counts from the end, as in Paddle: -1 is row V - 1), or None.
        dtype: floating dtype of the table.

    Shapes: ids int64 (or int32) of any shape -> y ids.shape + (D,). Parameter: ``weight``
    (V, D), Xavier/Glorot uniform in ``[-l, l]`` with ``l = sqrt(6 / (V + D))`` (Paddle's
    default), its padding row zeroed (``embedding_0.w_0``). Each call adds one
    ``lookup_table_v2`` op; an id outside [0, V) is an error naming it.

    >>> emb = Embedding(10, 3, padding_idx=0)
    >>> emb(tape.Variable(np.array([[0, 4], [9, 0]]))).shape
    (2, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 dtype="float32"):
        code = float_dtype("Embedding", dtype)
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise InvalidArgumentError(
                f"Embedding: padding_idx must be in [-{num_embeddings}, {num_embeddings}) or "
                f"None, received {padding_idx}")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        self.weight = xavier_uniform(f"{unique_name('embedding')}.w_0",
                                     (num_embeddings, embedding_dim), code, num_embeddings,
                                     embedding_dim)
        if self.padding_idx is not None:
            self.weight.value()[self.padding_idx] = 0

    def __call__(self, ids: Variable) -> Variable:
        padding_idx = -1 if self.padding_idx is None else self.padding_idx
        return tape.ops.lookup_table_v2(ids, self.weight, padding_idx=padding_idx)

    def __repr__(self):
        return (f"Embedding({self.num_embeddings}, {self.embedding_dim}, "
                f"padding_idx={self.padding_idx})")
