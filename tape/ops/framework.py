"""Program plumbing: feed and fetch (values in and out of a run), fill_zeros_like (backward).

In a program, ``feed`` reads the ``feed`` holder variable (FEED_MINIBATCH: the list of arrays
given to the Executor, one per ``col``) and ``fetch`` writes the ``fetch`` holder (FETCH_LIST).
Run eagerly, a holder is an array whose first axis indexes the columns.
"""
from ..attribute import INT, AtLeast, Attr
from ..registry import Slot, register_op
from .rules import fmt, same_as

_COL = Attr("col", INT, None, "which entry of the holder list", check=AtLeast(0))


def _feed_shape(ctx):
    holder, col = ctx.input("X"), ctx.attrs["col"]
    if not holder.shape:
        raise ctx.error(f"input X ({holder.name}) must be a holder with one entry per column, "
                        f"received a 0-D tensor")
    if -1 < holder.shape[0] <= col:
        raise ctx.error(f"attribute col={col} is out of range for X {fmt(holder.shape)}, which "
                        f"holds {holder.shape[0]} entries")
    ctx.set_output("Out", holder.shape[1:], holder.dtype)


def _feed_case(d):
    holder = d.floats((d.integer(1, 3),) + d.shape(0, 3))
    return {"X": holder}, {"col": d.integer(0, len(holder) - 1)}


def _fetch_case(d):
    return {"X": d.floats(d.shape(0, 4))}, {"col": d.integer(0, 3)}


def _zeros_case(d):
    return {"X": d.floats(d.shape(0, 4))}, {}


register_op(
    "feed", inputs=[Slot("X", "the feed holder (FEED_MINIBATCH): one array per column")],
    outputs=[Slot("Out", "the fed variable")], attrs=[_COL],
    infer_shape=_feed_shape, case=_feed_case, doc="Out = X[col]")

register_op(
    "fetch", inputs=[Slot("X", "the variable to fetch")],
    outputs=[Slot("Out", "the fetch holder (FETCH_LIST); X is stored at entry col")],
    attrs=[_COL], infer_shape=same_as("X"), case=_fetch_case,
    doc="Out[col] = a copy of X")

register_op(
    "fill_zeros_like", inputs=["X"], outputs=["Out"], infer_shape=same_as("X"),
    case=_zeros_case, doc="Out = zeros with the shape and dtype of X")
