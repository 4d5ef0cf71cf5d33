"""lookup_table_v2: rows of a table picked by integer ids (embeddings)."""
from .. import dtypes
from ..attribute import LONG, AtLeast, Attr
from ..registry import GradOp, Slot, register_op
from .rules import fmt, require_float


def _lookup_table_v2_shape(ctx):
    ids, table = ctx.input("Ids"), ctx.input("W")
    if ids.dtype not in (dtypes.INT64, dtypes.INT32):
        raise ctx.error(f"input Ids ({ids.name}) must be int64 or int32, received "
                        f"{dtypes.name(ids.dtype)}")
    require_float(ctx, "W", table)
    if len(table.shape) != 2:
        raise ctx.error(f"W must be a 2-D table (rows, width), received {fmt(table.shape)}")
    rows, padding_idx = table.shape[0], ctx.attrs["padding_idx"]
    if rows != -1 and padding_idx >= rows:
        raise ctx.error(f"attribute padding_idx={padding_idx} must be -1 (no padding) or a row "
                        f"of W {fmt(table.shape)} (< {rows})")
    ctx.set_output("Out", ids.shape + table.shape[1:], table.dtype)


def _lookup_table_v2_case(d):
    rows = d.integer(1, 6)
    padding_idx = d.choice((-1, d.integer(0, rows - 1)))
    ids = d.ints(d.shape(0, 3, 1, 4), 0, rows - 1)
    return {"Ids": ids, "W": d.floats((rows, d.integer(1, 4)))}, {"padding_idx": padding_idx}


register_op(
    "lookup_table_v2",
    inputs=[Slot("Ids", "int64 (or int32) row indices, any shape"),
            Slot("W", "the table, (rows, width)")],
    outputs=[Slot("Out", "Ids.shape + (width,)")],
    attrs=[Attr("padding_idx", LONG, -1, "a row whose lookups give zeros and no gradient; -1: "
                                         "none", check=AtLeast(-1))],
    infer_shape=_lookup_table_v2_shape,
    grad=GradOp(reads=["Ids", "W"], no_need_buffer=["W"], no_grad=["Ids"]),
    case=_lookup_table_v2_case,
    doc="Out[i...] = W[Ids[i...]], zeros where Ids == padding_idx. An id outside [0, rows) is "
        "an error. dW[k] = sum of dOut over the positions with Ids == k (none for padding_idx).")
