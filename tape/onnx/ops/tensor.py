"""Converters of the shape, indexing and creation ops."""
from __future__ import annotations

import numpy as np

from ... import dtypes
from ...geometry import unsqueezed
from ..table import converts

_INT64_MAX = 2**63 - 1


@converts("reshape2")
def reshape2(c):
    """Paddle's shape attribute means what ONNX's Reshape does without allowzero: 0 copies the
    input's dim, one -1 is inferred."""
    c.node("Reshape", [c.input("X"), c.ints(c.attrs["shape"])], [c.output("Out")])


@converts("transpose2")
def transpose2(c):
    rank = c.rank(c.input("X"))
    c.node("Transpose", [c.input("X")], [c.output("Out")],
           perm=[a % rank for a in c.attrs["axis"]])


@converts("squeeze2")
def squeeze2(c):
    """Drops the size-1 dims among axes (every size-1 dim if axes is empty), deciding at run
    time for a dim the program does not know (the batch): it stays unless it is 1, as Tape's
    kernel does."""
    x = c.input("X")
    shape, rank = c.shape(x), c.rank(x)
    named = sorted({a % rank for a in c.attrs["axes"]}) if rank else []
    if not c.attrs["axes"]:
        named = list(range(rank))
    if all(shape[i] != -1 for i in named):
        drop = [i for i in named if shape[i] == 1]
        if drop:
            c.squeeze(x, drop, c.output("Out"))
        else:
            c.identity(x, c.output("Out"))
        return
    runtime = c.node("Shape", [x])
    is_named = c.const(np.isin(np.arange(rank), named))
    dropped = c.node("And", [is_named, c.node("Equal", [runtime, c.ints([1] * rank)])])
    kept = c.node("Compress", [runtime, c.node("Not", [dropped])], axis=0)
    c.node("Reshape", [x, kept], [c.output("Out")])


@converts("unsqueeze2")
def unsqueeze2(c):
    """Paddle inserts one axis after another; ONNX takes the final positions, which are where
    the 1s of a marked shape end up."""
    x = c.input("X")
    marked = unsqueezed([None] * c.rank(x), c.attrs["axes"])
    c.unsqueeze(x, [i for i, n in enumerate(marked) if n == 1], c.output("Out"))


@converts("flatten_contiguous_range")
def flatten_contiguous_range(c):
    x = c.input("X")
    shape, rank = c.shape(x), c.rank(x)
    out = c.output("Out")
    if rank == 0:
        c.reshape(x, [1], out)
        return
    start, stop = c.attrs["start_axis"] % rank, c.attrs["stop_axis"] % rank
    if shape.count(-1) <= 1:
        c.reshape(x, c.shape(out), out)
        return
    runtime = c.node("Shape", [x])
    parts = []
    if start:
        parts.append(c.node("Slice", [runtime, c.ints([0]), c.ints([start])]))
    parts.append(c.ints([-1]))
    if stop + 1 < rank:
        parts.append(c.node("Slice", [runtime, c.ints([stop + 1]), c.ints([rank])]))
    c.node("Reshape", [x, c.node("Concat", parts, axis=0)], [out])


@converts("concat")
def concat(c):
    xs = c.inputs("X")
    c.node("Concat", xs, [c.output("Out")], axis=c.attrs["axis"] % c.rank(xs[0]))


@converts("split")
def split(c):
    """The pieces' sizes from the program's output shapes; a piece of unknown size (the batch
    axis) is computed from the input's runtime size."""
    x = c.input("X")
    axis = c.attrs["axis"] % c.rank(x)
    outs = c.outputs("Out")
    sizes = [c.shape(o)[axis] for o in outs]
    if -1 in sizes:
        if c.attrs["num"]:
            if c.opset < 18:
                c.node("Split", [x], outs, axis=axis)
            else:
                c.node("Split", [x], outs, axis=axis, num_outputs=len(outs))
            return
        known = sum(n for n in c.attrs["sections"] if n != -1)
        dim = c.node("Gather", [c.node("Shape", [x]), c.ints([axis])], axis=0)
        rest = c.node("Sub", [dim, c.ints([known])])
        sections = [rest if n == -1 else c.ints([n]) for n in c.attrs["sections"]]
        c.node("Split", [x, c.node("Concat", sections, axis=0)], outs, axis=axis)
        return
    c.node("Split", [x, c.ints(sizes)], outs, axis=axis)


@converts("slice")
def slice_(c):
    """Bounds as Paddle writes them (negative from the end, clamped), which is what ONNX's Slice
    does; decrease_axis squeezed after."""
    x, a = c.input("Input"), c.attrs
    rank = c.rank(x)
    out = c.output("Out")
    decrease = sorted({d % rank for d in a["decrease_axis"]})
    if not a["axes"]:
        sliced = c.identity(x, out if not decrease else c.temp("slice"))
    else:
        starts = [max(min(s, _INT64_MAX), -_INT64_MAX) for s in a["starts"]]
        ends = [max(min(e, _INT64_MAX), -_INT64_MAX) for e in a["ends"]]
        sliced = c.node("Slice", [x, c.ints(starts), c.ints(ends),
                                  c.ints([d % rank for d in a["axes"]])],
                        [out] if not decrease else None)
    if decrease:
        c.squeeze(sliced, decrease, out)


@converts("stack")
def stack(c):
    xs = c.inputs("X")
    axis = c.attrs["axis"] % (c.rank(xs[0]) + 1)
    grown = [c.unsqueeze(x, [axis]) for x in xs]
    if len(grown) == 1:
        c.identity(grown[0], c.output("Y"))
    else:
        c.node("Concat", grown, [c.output("Y")], axis=axis)


@converts("cast")
def cast(c):
    c.cast(c.input("X"), c.attrs["out_dtype"], c.output("Out"))


@converts("gather")
def gather(c):
    """Paddle's (n, 1) index gathers as (n,); a negative index counts from the end, as ONNX's."""
    x, index = c.input("X"), c.input("Index")
    axis = c.attrs["axis"] % c.rank(x)
    if c.rank(index) == 2:
        index = c.squeeze(index, [1])
    c.node("Gather", [x, index], [c.output("Out")], axis=axis)


@converts("lookup_table_v2")
def lookup_table_v2(c):
    """Rows of W; the padding_idx row reads as zeros."""
    ids, table = c.input("Ids"), c.input("W")
    out = c.output("Out")
    pad = c.attrs["padding_idx"]
    if pad == -1:
        c.node("Gather", [table, ids], [out], axis=0)
        return
    rows = c.node("Gather", [table, ids], axis=0)
    padded = c.unsqueeze(c.node("Equal", [ids, c.scalar_like(pad, ids)]), [c.rank(ids)])
    c.node("Where", [padded, c.scalar_like(0, table), rows], [out])


@converts("one_hot_v2")
def one_hot_v2(c):
    """Ids compared with 0..depth-1: an id outside [0, depth) gives a row of zeros (ONNX's
    OneHot would count a negative id from the end)."""
    ids, depth = c.input("X"), c.attrs["depth"]
    classes = c.const(np.arange(depth, dtype=c.np_dtype(ids)))
    hits = c.node("Equal", [c.unsqueeze(ids, [c.rank(ids)]), classes])
    c.cast(hits, c.attrs["dtype"], c.output("Out"))


def _arg(c, onnx_op: str):
    x, a = c.input("X"), c.attrs
    rank = c.rank(x)
    if a["flatten"] or rank == 0:
        x = c.reshape(x, [-1])
        found = c.node(onnx_op, [x], axis=0, keepdims=0, select_last_index=0)
        found = c.reshape(found, c.shape(c.output("Out")))   # () or 1s
    else:
        found = c.node(onnx_op, [x], axis=a["axis"] % rank, keepdims=int(a["keepdims"]),
                       select_last_index=0)
    c.cast(found, dtypes.INT64 if a["dtype"] == -1 else a["dtype"], c.output("Out"))


@converts("arg_max")
def arg_max(c):
    _arg(c, "ArgMax")


@converts("arg_min")
def arg_min(c):
    _arg(c, "ArgMin")


def sorted_top(c, count, largest: bool) -> None:
    """Out and Indices of X's ``count(x, axis)`` largest (or smallest) values along the
    ``axis`` attribute, sorted, ties towards the lower index as Tape's sort; a 0-D X is its own
    top, at index 0."""
    x = c.input("X")
    rank = c.rank(x)
    if rank == 0:
        c.identity(x, c.output("Out"))
        c.identity(c.const(np.zeros((), np.int64)), c.output("Indices"))
        return
    axis = c.attrs["axis"] % rank
    c.node("TopK", [x, count(x, axis)], [c.output("Out"), c.output("Indices")], axis=axis,
           largest=int(largest), sorted=1)


@converts("top_k_v2")
def top_k_v2(c):
    sorted_top(c, lambda x, axis: c.ints([c.attrs["k"]]), c.attrs["largest"])


@converts("accuracy")
def accuracy(c):
    """A row is correct when its label is among its indices; Accuracy = Correct / max(Total, 1)
    (0 for an empty batch)."""
    indices, label = c.input("Indices"), c.input("Label")
    hit = c.cast(c.node("Equal", [indices, label]), dtypes.INT32)
    row_hit = c.reduce("ReduceMax", hit, [1], False)
    correct = c.reduce("ReduceSum", row_hit, [0], False, c.output("Correct"))
    total = c.node("Gather", [c.node("Shape", [indices]), c.ints([0])], axis=0)
    total = c.reshape(c.cast(total, dtypes.INT32), [], c.output("Total"))
    denominator = c.node("Max", [total, c.const(np.ones((), np.int32))])
    c.node("Div", [c.cast(correct, dtypes.FP32), c.cast(denominator, dtypes.FP32)],
           [c.output("Accuracy")])
