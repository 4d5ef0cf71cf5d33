"""Copies that repeat or rearrange X's elements: expand_v2 and tile (repeat), index_select (pick
along an axis), argsort (sort along an axis) and cumsum (running sums along an axis)."""
import math

from .. import dtypes
from ..attribute import BOOLEAN, INT, INTS, Attr
from ..registry import GradOp, Slot, register_op
from .indexing import _require
from .manipulation import reject_tensor
from .rules import fmt, normalize_axis


def _axis(ctx, attr: str, rank: int) -> int:
    """``attr`` as an axis of X; a 0-D X takes 0 or -1, as Paddle's cumsum and argsort do."""
    axis = ctx.attrs[attr]
    if rank == 0 and axis in (0, -1):
        return 0
    return normalize_axis(ctx, axis, rank, attr)


# ---- expand_v2 and tile ----

def _expand_v2_shape(ctx):
    reject_tensor(ctx, "Shape", "shape")
    reject_tensor(ctx, "expand_shapes_tensor", "shape")
    x, target = ctx.input("X"), list(ctx.attrs["shape"])
    new = len(target) - len(x.shape)
    if new < 0:
        raise ctx.error(f"attribute shape={target} has fewer dims than X {fmt(x.shape)}: "
                        f"expected at least {len(x.shape)}")
    out = []
    for i, size in enumerate(target):
        have = x.shape[i - new] if i >= new else None
        if size == -1 and have is not None:
            out.append(have)
        elif size < 0:
            where = "a new leading dim" if have is None else "a dim of X"
            raise ctx.error(f"attribute shape={target} holds {size} at {i}, {where}: expected "
                            f"a size >= 0" + ("" if have is None else " or -1 (keep X's)"))
        elif have not in (None, 1, -1, size):
            raise ctx.error(f"attribute shape={target} asks size {size} at {i} where X "
                            f"{fmt(x.shape)} has {have}: only a dim of size 1 expands")
        else:
            out.append(size)
    ctx.set_output("Out", out, x.dtype)


def _expand_v2_case(d):
    """X with some size-1 dims, expanded or kept (-1, or the same size); 0 to 2 new leading
    dims, sometimes of size 0."""
    x = d.floats(d.shape(0, 3, 1, 3))
    target = [d.integer(0, 3) for _ in range(d.integer(0, 2))]
    target += [d.choice((1, 2, 3, -1)) if n == 1 else d.choice((n, -1)) for n in x.shape]
    return {"X": x}, {"shape": target}


def _tile_shape(ctx):
    reject_tensor(ctx, "RepeatTimes", "repeat_times")
    reject_tensor(ctx, "repeat_times_tensor", "repeat_times")
    x, times = ctx.input("X"), list(ctx.attrs["repeat_times"])
    if any(t < 0 for t in times):
        raise ctx.error(f"attribute repeat_times={times} must hold counts >= 0")
    rank = max(len(x.shape), len(times))
    shape = (1,) * (rank - len(x.shape)) + tuple(x.shape)
    times = [1] * (rank - len(times)) + times
    ctx.set_output("Out", [-1 if n == -1 and t else n * t for n, t in zip(shape, times)],
                   x.dtype)


def _tile_case(d):
    x = d.floats(d.shape(0, 3, 1, 3))
    return {"X": x}, {"repeat_times": [d.integer(0 if d.integer(0, 5) == 0 else 1, 3)
                                       for _ in range(d.integer(0, 4))]}


_LIST = "as 1-element int tensors (not supported)"

register_op(
    "expand_v2",
    inputs=["X", Slot("Shape", "shape as a 1-D int tensor (not supported)", dispensable=True),
            Slot("expand_shapes_tensor", "shape " + _LIST, duplicable=True, dispensable=True)],
    outputs=["Out"],
    attrs=[Attr("shape", INTS, (), "Out's shape: X's dims aligned to its end, -1 keeping one; "
                "X's size-1 dims expand, new leading dims are added")],
    infer_shape=_expand_v2_shape, case=_expand_v2_case,
    grad=GradOp(reads=["X"], no_need_buffer=["X"], grads=("X",)),
    doc="Out = X broadcast to shape (numpy's broadcast_to, with -1 for 'as X'); dX sums dOut "
        "over the expanded dims")

register_op(
    "tile",
    inputs=["X", Slot("RepeatTimes", "repeat_times as a 1-D int tensor (not supported)",
                      dispensable=True),
            Slot("repeat_times_tensor", "repeat_times " + _LIST, duplicable=True,
                 dispensable=True)],
    outputs=["Out"],
    attrs=[Attr("repeat_times", INTS, (), "how many copies along each dim (>= 0), aligned to "
                "the end of X's shape; the shorter of the two is padded with leading 1s")],
    infer_shape=_tile_shape, case=_tile_case,
    grad=GradOp(reads=["X"], no_need_buffer=["X"], grads=("X",)),
    doc="Out = X repeated repeat_times[i] times along dim i (numpy's tile); dX sums dOut over "
        "the copies")


# ---- index_select ----

def _index_select_shape(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    _require(ctx, "Index", dtypes.INDEX)
    if not x.shape:
        raise ctx.error(f"input X ({x.name}) is 0-D: expected rank >= 1 to select along a dim")
    if len(index.shape) not in (1, 2) or index.shape[1:] not in ((), (1,), (-1,)):
        raise ctx.error(f"input Index ({index.name}) has shape {fmt(index.shape)}: expected "
                        f"(n,) or (n, 1)")
    dim = normalize_axis(ctx, ctx.attrs["dim"], len(x.shape), "dim")
    ctx.set_output("Out", x.shape[:dim] + index.shape[:1] + x.shape[dim + 1:], x.dtype)


def _index_select_case(d):
    """Indices that repeat and count from the end, (n,) or (n, 1), int32 or int64."""
    shape = d.shape(1, 3)
    dim = d.integer(-len(shape), len(shape) - 1)
    size = shape[dim]
    n = d.integer(0, 5)
    index = d.ints(d.choice(((n,), (n, 1))), -size, size - 1).astype(d.choice(("int32",
                                                                               "int64")))
    return {"X": d.floats(shape), "Index": index}, {"dim": dim}


register_op(
    "index_select",
    inputs=[Slot("X", "the tensor to pick from, rank >= 1"),
            Slot("Index", "int32 or int64 positions along dim, (n,) or (n, 1); "
                          "-size <= index < size")],
    outputs=[Slot("Out", "X with its dim of size n")],
    attrs=[Attr("dim", INT, 0, "the dim to pick along; negative counts from the end")],
    infer_shape=_index_select_shape, case=_index_select_case,
    grad=GradOp(reads=["X", "Index"], no_need_buffer=["X"], grads=("X",)),
    doc="Out = X[..., Index, ...] with Index on dim; an index outside [-size, size) is an "
        "error. dX is zeros with dOut added at each index (a negative one counting from the "
        "end, as the forward does).")


# ---- argsort and cumsum ----

def _argsort_shape(ctx):
    _require(ctx, "X", dtypes.INDEXED)
    x = ctx.input("X")
    _axis(ctx, "axis", len(x.shape))
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Indices", x.shape, dtypes.INT64)


def _argsort_case(d):
    """Distinct values (no ties: a finite-difference gradient needs them; ties are in
    tests/test_rearrange_ops.py); 0-D X too."""
    shape = d.shape(0, 3)
    rank = len(shape)
    axis = d.integer(-rank, rank - 1) if rank else d.choice((0, -1))
    return {"X": d.distinct_floats(shape)}, {"axis": axis, "descending": d.boolean(),
                                             "stable": d.boolean()}


register_op(
    "argsort", inputs=[Slot("X", "float32, float64, int32 or int64")],
    outputs=[Slot("Out", "X sorted along axis"),
             Slot("Indices", "int64: where each value of Out is in X along axis")],
    attrs=[Attr("axis", INT, -1, "the axis to sort along; negative counts from the end"),
           Attr("descending", BOOLEAN, False, "largest first"),
           Attr("stable", BOOLEAN, False, "keep equal values in index order (always so here)")],
    infer_shape=_argsort_shape, case=_argsort_case,
    grad=GradOp(reads=["X", "Indices"], no_need_buffer=["X"], out_grads=["Out"]),
    doc="Out, Indices = X sorted along axis and the positions it took them from. Equal values "
        "keep index order and NaN sorts above every number (last ascending, first "
        "descending), as Paddle 3.3.1's kernel. dX is zeros with dOut put at Indices.")


def _cumsum_shape(ctx):
    _require(ctx, "X", dtypes.INDEXED)
    x = ctx.input("X")
    if ctx.attrs["flatten"]:
        if ctx.attrs["axis"] not in (0, -1):
            raise ctx.error(f"attribute axis={ctx.attrs['axis']} with flatten: expected 0 or -1, "
                            f"an axis of the flattened X (as Paddle's kernel checks)")
        shape = (-1 if -1 in x.shape else math.prod(x.shape),)
    else:
        _axis(ctx, "axis", len(x.shape))
        shape = x.shape
    ctx.set_output("Out", shape, x.dtype)


def _cumsum_case(d):
    shape = d.shape(0, 3, 1, 4)
    rank = len(shape)
    flatten = d.integer(0, 3) == 0
    axis = d.integer(-rank, rank - 1) if rank and not flatten else d.choice((0, -1))
    return {"X": d.floats(shape)}, {"axis": axis, "flatten": flatten,
                                    "exclusive": d.boolean(), "reverse": d.boolean()}


register_op(
    "cumsum", inputs=[Slot("X", "float32, float64, int32 or int64")],
    outputs=[Slot("Out", "X's shape, or (X.size,) when flatten")],
    attrs=[Attr("axis", INT, -1, "the axis to sum along; negative counts from the end"),
           Attr("flatten", BOOLEAN, False, "sum over X flattened (axis then 0 or -1)"),
           Attr("exclusive", BOOLEAN, False, "leave each element out of its own sum"),
           Attr("reverse", BOOLEAN, False, "sum from the end")],
    infer_shape=_cumsum_shape, case=_cumsum_case,
    grad=GradOp(reads=["X"], no_need_buffer=["X"]),
    doc="Out[i] = X[0] + ... + X[i] along axis (exclusive: to X[i - 1]; reverse: from the "
        "end). Paddle 3.3.1's kernel ignores exclusive where X holds one element (Out = X "
        "there); this gives 0, as it does for any other size. dX is the cumsum of dOut the "
        "other way round.")
