"""Indices in and out: gather, one_hot_v2, arg_max, arg_min, top_k_v2 and accuracy.

An index that is out of range can only be seen in the values, so the kernels check it and raise
naming the op and the slot; everything the shapes and attributes decide, the rules check first.
"""
from .. import dtypes
from ..attribute import BOOLEAN, INT, LONG, AtLeast, Attr, OneOf
from ..registry import GradOp, Slot, register_op
from .manipulation import reject_tensor
from .rules import fmt, normalize_axis, require_dtype, require_float, same_dim


def _require(ctx, slot: str, allowed) -> None:
    d = ctx.input(slot)
    if d.dtype not in allowed:
        names = ", ".join(dtypes.name(t) for t in allowed)
        raise ctx.error(f"input {slot} ({d.name}) must be one of {names}, received "
                        f"{dtypes.name(d.dtype)}")


# ---- gather ----

def _gather_shape(ctx):
    reject_tensor(ctx, "Axis", "axis")
    _require(ctx, "X", dtypes.INDEXED)
    _require(ctx, "Index", dtypes.INDEX)
    x, index = ctx.input("X"), ctx.input("Index")
    if not x.shape:
        raise ctx.error(f"input X ({x.name}) is 0-D: expected rank >= 1 to gather along an axis")
    if len(index.shape) > 2 or (len(index.shape) == 2 and index.shape[1] not in (1, -1)):
        raise ctx.error(f"input Index ({index.name}) has shape {fmt(index.shape)}: expected "
                        f"(n,), (n, 1) or a 0-D index")
    axis = normalize_axis(ctx, ctx.attrs["axis"], len(x.shape))
    ctx.set_output("Out", x.shape[:axis] + index.shape[:1] + x.shape[axis + 1:], x.dtype)


def _gather_case(d):
    """Indices that repeat and count from the end, as (n,), (n, 1) or 0-D, int32 or int64."""
    shape = d.shape(1, 3)
    axis = d.integer(-len(shape), len(shape) - 1)
    size = shape[axis]
    index_shape = d.choice([(d.integer(0, 5),), (d.integer(0, 5), 1), ()])
    index = d.ints(index_shape, -size, size - 1).astype(d.choice(("int32", "int64")))
    return {"X": d.floats(shape), "Index": index}, {"axis": axis}


register_op(
    "gather",
    inputs=[Slot("X", "the tensor to pick from"),
            Slot("Index", "int32 or int64 positions along axis, (n,), (n, 1) or 0-D; "
                          "-size <= index < size"),
            Slot("Axis", "axis as a tensor (not supported)", dispensable=True)],
    outputs=[Slot("Out", "X with its axis dim replaced by n (dropped for a 0-D Index)")],
    attrs=[Attr("axis", INT, 0, "the axis to pick along; negative counts from the end")],
    infer_shape=_gather_shape, case=_gather_case,
    grad=GradOp(reads=["X", "Index"], no_need_buffer=["X"], no_grad=["Index", "Axis"]),
    doc="Out = X[..., Index, ...] with Index on axis. An index outside [-size, size) is an "
        "error. dX is zeros with dOut added at each index, so a repeated index accumulates.")


# ---- one_hot_v2 ----

def _one_hot_v2_shape(ctx):
    reject_tensor(ctx, "depth_tensor", "depth")
    _require(ctx, "X", dtypes.INDEX)
    ctx.set_output("Out", ctx.input("X").shape + (ctx.attrs["depth"],), ctx.attrs["dtype"])


def _one_hot_v2_case(d):
    """Empty inputs too; out-of-range values (-1 and depth) only where they are allowed."""
    depth, allow = d.integer(1, 5), d.boolean()
    low, high = (-1, depth) if allow else (0, depth - 1)
    x = d.ints(d.shape(0, 3, 0, 4), low, high)
    attrs = {"depth": depth, "allow_out_of_range": allow,
             "dtype": d.choice((dtypes.FP32, dtypes.FP64, dtypes.INT64))}
    return {"X": x.astype(d.choice(("int32", "int64")))}, attrs


register_op(
    "one_hot_v2",
    inputs=[Slot("X", "int32 or int64 class ids, any shape"),
            Slot("depth_tensor", "depth as a tensor (not supported)", dispensable=True)],
    outputs=[Slot("Out", "X.shape + (depth,)")],
    attrs=[Attr("depth", INT, None, "the number of classes", check=AtLeast(1)),
           Attr("dtype", INT, dtypes.FP32, "VarType of Out", check=OneOf(*dtypes.ALL)),
           Attr("allow_out_of_range", BOOLEAN, False,
                "an id outside [0, depth) gives a row of zeros instead of an error")],
    infer_shape=_one_hot_v2_shape, case=_one_hot_v2_case,
    doc="Out[..., k] = 1 where X[...] == k, else 0; no gradient. (Paddle 3.3.1's kernel raises "
        "for an id outside [0, depth) even with allow_out_of_range; this follows the attribute "
        "as Paddle documents it.)")


# ---- arg_max and arg_min ----

def _arg_shape(ctx):
    _require(ctx, "X", dtypes.INDEXED)
    x, attrs = ctx.input("X"), ctx.attrs
    rank, keep = len(x.shape), attrs["keepdims"]
    if rank == 0 and attrs["axis"] in (0, -1):    # Paddle takes either for a 0-D X
        axis = 0
    else:
        axis = normalize_axis(ctx, attrs["axis"], rank)
    if attrs["flatten"]:
        shape, searched = (1,) * rank if keep else (), x.shape
    else:
        kept = (1,) if keep else ()
        shape, searched = x.shape[:axis] + kept + x.shape[axis + 1:], x.shape[axis:axis + 1]
    if 0 in searched:
        where = "" if attrs["flatten"] else f" along axis {axis}"
        raise ctx.error(f"X {fmt(x.shape)} has no elements{where}: expected at least one to "
                        f"return the index of")
    dtype = attrs["dtype"]
    ctx.set_output("Out", shape, dtypes.INT64 if dtype == -1 else dtype)


def _arg_case(d):
    """Small integer values, so ties are common (the first index wins); 0-D X too."""
    shape = d.shape(0, 3)
    rank = max(len(shape), 1)
    attrs = {"axis": d.integer(-rank, rank - 1), "keepdims": d.boolean(),
             "flatten": d.integer(0, 3) == 0, "dtype": d.choice((-1, *dtypes.INDEX))}
    return {"X": d.ints(shape, -2, 2).astype("float64")}, attrs


_ARG_ATTRS = [
    Attr("axis", LONG, None, "the axis to search; negative counts from the end"),
    Attr("keepdims", BOOLEAN, False, "keep the searched axis as a size-1 dim"),
    Attr("flatten", BOOLEAN, False, "search all of X as one flat axis (axis is still checked)"),
    Attr("dtype", INT, dtypes.INT64, "VarType of Out: int32 or int64 (-1: int64)",
         check=OneOf(-1, *dtypes.INDEX)),
]

for _type, _what in (("arg_max", "largest"), ("arg_min", "smallest")):
    register_op(_type, inputs=["X"], outputs=["Out"], attrs=_ARG_ATTRS, infer_shape=_arg_shape,
                case=_arg_case,
                doc=f"Out = the index of the {_what} element of X along axis (of the flattened X "
                    f"if flatten), the first one among ties; no gradient.")


# ---- top_k_v2 ----

def _top_k_shape(ctx):
    reject_tensor(ctx, "K", "k")
    _require(ctx, "X", dtypes.INDEXED)
    x, k, axis = ctx.input("X"), ctx.attrs["k"], ctx.attrs["axis"]
    if not x.shape and axis in (0, -1):    # Paddle takes either for a 0-D X
        shape, size = (), 1
    else:
        axis = normalize_axis(ctx, axis, len(x.shape))
        shape, size = x.shape[:axis] + (k,) + x.shape[axis + 1:], x.shape[axis]
    if size != -1 and k > size:
        raise ctx.error(f"attribute k={k} is larger than X ({x.name}) {fmt(x.shape)} along axis "
                        f"{axis}: expected 1 <= k <= {size}")
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("Indices", shape, dtypes.INT64)


def _top_k_case(d):
    """Distinct values, as a finite-difference gradient needs (ties: tests/test_compare_ops.py);
    0-D X too."""
    shape = d.shape(0, 3)
    rank = len(shape)
    axis = d.integer(-rank, rank - 1) if rank else d.choice((0, -1))
    attrs = {"k": d.integer(1, shape[axis] if rank else 1), "axis": axis,
             "largest": d.boolean(), "sorted": d.boolean()}
    return {"X": d.distinct_floats(shape)}, attrs


register_op(
    "top_k_v2",
    inputs=[Slot("X", "the values to search; float32, float64, int32 or int64"),
            Slot("K", "k as a tensor (not supported)", dispensable=True)],
    outputs=[Slot("Out", "the k largest (smallest) values along axis; X with that dim k"),
             Slot("Indices", "int64 positions of Out's values in X along axis")],
    attrs=[Attr("k", INT, 1, "how many values to take", check=AtLeast(1)),
           Attr("axis", INT, -1, "the axis to search; negative counts from the end"),
           Attr("largest", BOOLEAN, True, "the largest values (else the smallest)"),
           Attr("sorted", BOOLEAN, True, "Out in order (always so here)")],
    infer_shape=_top_k_shape, case=_top_k_case,
    grad=GradOp(reads=["X", "Indices"], no_need_buffer=["X"], out_grads=["Out"], no_grad=["K"]),
    doc="Out, Indices = the k largest (largest=False: smallest) values of X along axis and "
        "their positions, largest (smallest) first. Ties go to the lower index, and NaN counts "
        "as larger than every number, as in a stable numpy sort; Paddle 3.3.1's CPU kernel "
        "gives the same values but may order tied indices otherwise (std::partial_sort). "
        "sorted=False also sorts. dX is zeros with dOut put at Indices.")


# ---- accuracy ----

def _accuracy_shape(ctx):
    out, indices, label = ctx.input("Out"), ctx.input("Indices"), ctx.input("Label")
    require_float(ctx, "Out", out)
    require_dtype(ctx, "Indices", dtypes.INT64)
    require_dtype(ctx, "Label", dtypes.INT64)
    merged = [same_dim(a, b) for a, b in zip(out.shape, indices.shape)]
    if len(indices.shape) != 2 or len(out.shape) != 2 or None in merged:
        raise ctx.error(f"Out ({out.name}) has shape {fmt(out.shape)} and Indices "
                        f"({indices.name}) {fmt(indices.shape)}: expected both (N, k), as "
                        f"top_k_v2 gives them")
    if len(label.shape) != 2 or label.shape[1] not in (1, -1) \
            or same_dim(merged[0], label.shape[0]) is None:
        raise ctx.error(f"Label ({label.name}) has shape {fmt(label.shape)}: expected "
                        f"({merged[0]}, 1), a class id per row of Indices {fmt(indices.shape)}")
    ctx.set_output("Accuracy", (), dtypes.FP32)
    ctx.set_output("Correct", (), dtypes.INT32)
    ctx.set_output("Total", (), dtypes.INT32)


def _accuracy_case(d):
    """Ids and labels among a few classes, so rows hit and miss; repeated ids; empty batches."""
    n, k, classes = d.integer(0, 5), d.integer(1, 3), d.integer(1, 4)
    return {"Out": d.floats((n, k)), "Indices": d.ints((n, k), 0, classes - 1),
            "Label": d.ints((n, 1), 0, classes - 1)}, {}


register_op(
    "accuracy",
    inputs=[Slot("Out", "the top-k values, (N, k) floating; only its shape is read",
                 no_need_buffer=True),
            Slot("Indices", "int64 (N, k): the top-k class ids of each row"),
            Slot("Label", "int64 (N, 1): the true class id of each row")],
    outputs=[Slot("Accuracy", "float32, 0-D: Correct / Total (0 for an empty batch)"),
             Slot("Correct", "int32, 0-D: how many rows hold their label among Indices"),
             Slot("Total", "int32, 0-D: N")],
    infer_shape=_accuracy_shape, case=_accuracy_case,
    doc="Top-k accuracy, as Paddle's accuracy op: a row is correct when its Label is among its "
        "Indices. 0-D outputs, as Paddle 3.3.1's. No gradient. "
        "``tape.ops.accuracy(*tape.ops.top_k_v2(logits, k=1), label)``.")
