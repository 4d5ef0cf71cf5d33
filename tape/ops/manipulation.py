"""Joining, cutting and reshaping: concat, split, slice, stack, squeeze2, unsqueeze2,
flatten_contiguous_range."""
import math

from .. import dtypes
from ..attribute import INT, INTS, AtLeast, Attr
from ..desc import OpDesc
from ..geometry import unsqueezed
from ..registry import GradMaker, GradOp, Slot, grad_name, register_op
from .rules import fmt, normalize_axis, same_dim, xshape
from .tensor import XSHAPE


def reject_tensor(ctx, slot: str, attr: str) -> None:
    """Shape inference needs ``attr``'s value, which a tensor only holds at run time."""
    if ctx.has_input(slot):
        raise ctx.error(f"input {slot} is not supported: expected the value in the '{attr}' "
                        f"attribute, received a tensor")


def _common_shape(ctx, xs, skip_axis=None) -> list:
    """The shape all of ``xs`` (slot X) share, except along ``skip_axis``; one dtype too."""
    first = xs[0]
    shape = list(first.shape)
    for i, x in enumerate(xs[1:], 1):
        if x.dtype != first.dtype:
            raise ctx.error(f"X[{i}] ({x.name}) is {dtypes.name(x.dtype)} but X[0] ({first.name}) "
                            f"is {dtypes.name(first.dtype)}: all inputs must share a dtype")
        merged = [a if j == skip_axis else same_dim(a, b)
                  for j, (a, b) in enumerate(zip(shape, x.shape))]
        if len(x.shape) != len(shape) or None in merged:
            but = "" if skip_axis is None else f" except along axis {skip_axis}"
            raise ctx.error(f"X[{i}] ({x.name}) has shape {fmt(x.shape)} but X[0] ({first.name}) "
                            f"has {fmt(first.shape)}: the shapes must match{but}")
        shape = merged
    return shape


def _sides(d, n, low=1, high=3):
    return [d.integer(low, high) for _ in range(n)]


# ---- concat and split ----

def _concat_shape(ctx):
    reject_tensor(ctx, "AxisTensor", "axis")
    xs = ctx.inputs("X")
    rank = len(xs[0].shape)
    if rank == 0:
        raise ctx.error(f"input X[0] ({xs[0].name}) is 0-D: expected tensors of rank >= 1 to "
                        f"join along an axis")
    axis = normalize_axis(ctx, ctx.attrs["axis"], rank)
    shape = _common_shape(ctx, xs, axis)
    sizes = [x.shape[axis] for x in xs]
    shape[axis] = -1 if -1 in sizes else sum(sizes)
    ctx.set_output("Out", shape, xs[0].dtype)


def _concat_case(d):
    shape = list(d.shape(1, 4))
    axis = d.integer(-len(shape), len(shape) - 1)
    parts = []
    for size in _sides(d, d.integer(1, 4)):
        shape[axis] = size
        parts.append(d.floats(tuple(shape)))
    return {"X": parts}, {"axis": axis}


def _split_sizes(ctx, dim: int, num: int, sections) -> list:
    """The sizes of split's outputs along the split axis of size ``dim`` (-1: unknown)."""
    if num and sections:
        raise ctx.error(f"attributes num={num} and sections={list(sections)} are both given: "
                        f"expected one of them")
    if num:
        if dim != -1 and dim % num:
            raise ctx.error(f"attribute num={num} does not divide the split axis of size {dim}")
        return [-1 if dim == -1 else dim // num] * num
    if not sections:
        raise ctx.error("expected num > 0 or a non-empty sections attribute, received neither")
    if sections.count(-1) > 1 or any(s < -1 for s in sections):
        raise ctx.error(f"attribute sections={list(sections)} must hold sizes >= 0 and at most "
                        f"one -1 (inferred)")
    known = sum(s for s in sections if s != -1)
    if dim == -1:
        return list(sections)
    if -1 in sections and known >= dim:   # as Paddle's check: the -1 is at least 1 long
        raise ctx.error(f"attribute sections={list(sections)}: the sizes other than -1 must "
                        f"add up to less than the split axis size {dim}")
    if -1 not in sections and known != dim:
        raise ctx.error(f"attribute sections={list(sections)} must add up to the split axis "
                        f"size {dim}")
    return [dim - known if s == -1 else s for s in sections]


def _split_shape(ctx):
    reject_tensor(ctx, "AxisTensor", "axis")
    reject_tensor(ctx, "SectionsTensorList", "sections")
    x = ctx.input("X")
    if not x.shape:
        raise ctx.error(f"input X ({x.name}) is 0-D: expected rank >= 1 to split along an axis")
    axis = normalize_axis(ctx, ctx.attrs["axis"], len(x.shape))
    sizes = _split_sizes(ctx, x.shape[axis], ctx.attrs["num"], ctx.attrs["sections"])
    ctx.set_outputs("Out", [(x.shape[:axis] + (n,) + x.shape[axis + 1:], x.dtype)
                            for n in sizes])


def _split_case(d):
    shape = list(d.shape(1, 4))
    axis = d.integer(-len(shape), len(shape) - 1)
    if d.boolean():
        num = d.integer(1, 3)
        shape[axis] = num * d.integer(1, 2)
        attrs = {"num": num}
    else:
        sections = _sides(d, d.integer(1, 3), 0)
        shape[axis] = sum(sections)
        if shape[axis] == 0:
            sections[0] = shape[axis] = 1
        if d.boolean():   # a -1 stands for at least one element
            sections[d.choice(i for i, n in enumerate(sections) if n > 0)] = -1
        attrs = {"sections": sections}
    return {"X": d.floats(tuple(shape))}, {"axis": axis, **attrs}


class SplitGrad(GradMaker):
    """X@GRAD = concat(Out[0]@GRAD, Out[1]@GRAD, ...) along ``axis``: a concat op, as Paddle's
    SplitGradMaker emits."""

    grads = ("X",)
    depends_on_attrs = True

    def make(self, op):
        return [OpDesc("concat", {"X": [grad_name(n) for n in op.outputs["Out"]]},
                       {"Out": [grad_name(op.inputs["X"][0])]}, {"axis": op.attrs["axis"]})]


_AXIS_TENSOR = Slot("AxisTensor", "axis as a 1-element int tensor (not supported)",
                    dispensable=True)

register_op(
    "concat", inputs=[Slot("X", "tensors of one rank and dtype", duplicable=True), _AXIS_TENSOR],
    outputs=["Out"],
    attrs=[Attr("axis", INT, 0, "the axis to join along; negative counts from the end")],
    infer_shape=_concat_shape, case=_concat_case,
    grad=GradOp(reads=["X"], no_need_buffer=["X"], no_grad=["AxisTensor"]),
    doc="Out = X[0], X[1], ... joined along axis (their other dims equal)")

register_op(
    "split",
    inputs=["X", _AXIS_TENSOR,
            Slot("SectionsTensorList", "sections as 1-element tensors (not supported)",
                 duplicable=True, dispensable=True)],
    outputs=[Slot("Out", "the pieces, in order", duplicable=True)],
    attrs=[Attr("axis", INT, 0, "the axis to split; negative counts from the end"),
           Attr("num", INT, 0, "split into num equal pieces (0: use sections)", check=AtLeast(0)),
           Attr("sections", INTS, (), "the pieces' sizes along axis; one -1 is inferred")],
    infer_shape=_split_shape, grad=SplitGrad(), case=_split_case,
    doc="Out[i] = X cut along axis into num equal pieces, or pieces of the sizes in sections")


# ---- slice and stack ----

def _slice_bounds(dim: int, start: int, end: int) -> tuple:
    """Paddle's clamping of one axis' ``start``/``end``: negative counts from the end, then both
    are clipped to ``[0, dim]`` (as Python slicing does)."""
    start = min(max(start + dim if start < 0 else start, 0), dim)
    end = min(max(end + dim if end < 0 else end, 0), dim)
    return start, end


def _slice_shape(ctx):
    for slot, attr in (("StartsTensor", "starts"), ("EndsTensor", "ends"),
                       ("StartsTensorList", "starts"), ("EndsTensorList", "ends")):
        reject_tensor(ctx, slot, attr)
    x = ctx.input("Input")
    a = ctx.attrs
    axes, starts, ends = a["axes"], a["starts"], a["ends"]
    if not len(axes) == len(starts) == len(ends):
        raise ctx.error(f"attributes axes={list(axes)}, starts={list(starts)} and "
                        f"ends={list(ends)} must have the same length")
    rank = len(x.shape)
    shape = list(x.shape)
    sliced = set()
    for k, (axis, start, end) in enumerate(zip(axes, starts, ends)):
        i = normalize_axis(ctx, axis, rank, f"axes[{k}]")
        if i in sliced:
            raise ctx.error(f"attribute axes={list(axes)} names axis {i} twice")
        sliced.add(i)
        if shape[i] == -1:
            continue
        lo, hi = _slice_bounds(shape[i], start, end)
        if hi < lo:
            raise ctx.error(f"slicing axis {i} of Input {fmt(x.shape)} from {start} to {end} "
                            f"ends before it starts (at {hi} < {lo} after clamping)")
        shape[i] = hi - lo
    dropped = set()
    for k, axis in enumerate(a["decrease_axis"]):
        i = normalize_axis(ctx, axis, rank, f"decrease_axis[{k}]")
        if shape[i] not in (1, -1):
            raise ctx.error(f"attribute decrease_axis={list(a['decrease_axis'])} drops axis {i}, "
                            f"whose sliced size is {shape[i]}: expected 1")
        dropped.add(i)
    ctx.set_output("Out", [n for i, n in enumerate(shape) if i not in dropped], x.dtype)


def _slice_case(d):
    """Each sliced axis' start/end written plainly, from the end (negative) or past the ends
    (clamped); size-1 results sometimes dropped with decrease_axis."""
    shape = d.shape(1, 4, 1, 5)
    rank = len(shape)
    axes, starts, ends, decrease = [], [], [], []
    for i in range(rank):
        if not d.boolean():
            continue
        dim = shape[i]
        lo = d.integer(0, dim - 1)
        hi = d.integer(lo + 1, dim)
        start = d.choice([lo, lo - dim] + ([-dim - 3] if lo == 0 else []))
        end = d.choice([hi] + ([hi - dim] if hi < dim else [dim + 7, 2**31 - 1]))
        axes.append(i - rank if d.boolean() else i)
        starts.append(start)
        ends.append(end)
        if hi - lo == 1 and d.boolean():
            decrease.append(i)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": decrease}
    if d.boolean():
        attrs["infer_flags"] = [1] * len(axes)
    return {"Input": d.floats(shape)}, attrs


def _stack_shape(ctx):
    xs = ctx.inputs("X")
    rank = len(xs[0].shape)
    axis = ctx.attrs["axis"]
    if not -rank - 1 <= axis <= rank:
        raise ctx.error(f"attribute axis={axis} is out of range for stacking inputs of rank "
                        f"{rank} (expected {-rank - 1} <= axis <= {rank})")
    axis %= rank + 1
    shape = _common_shape(ctx, xs)
    ctx.set_output("Y", shape[:axis] + [len(xs)] + shape[axis:], xs[0].dtype)


def _stack_case(d):
    shape = d.shape(0, 3)
    return ({"X": [d.floats(shape) for _ in range(d.integer(1, 4))]},
            {"axis": d.integer(-len(shape) - 1, len(shape))})


_SLICE_LIST = "as 1-element int tensors (not supported)"

register_op(
    "slice",
    inputs=["Input", Slot("StartsTensor", "starts as a 1-D int tensor (not supported)",
                          dispensable=True),
            Slot("EndsTensor", "ends as a 1-D int tensor (not supported)", dispensable=True),
            Slot("StartsTensorList", "starts " + _SLICE_LIST, duplicable=True, dispensable=True),
            Slot("EndsTensorList", "ends " + _SLICE_LIST, duplicable=True, dispensable=True)],
    outputs=["Out"],
    attrs=[Attr("axes", INTS, None, "the axes that starts and ends apply to"),
           Attr("starts", INTS, (), "first index per axis; negative counts from the end"),
           Attr("ends", INTS, (), "index past the last per axis; clamped to the axis size"),
           Attr("infer_flags", INTS, (), "per axis, -1 when its bounds come from tensors; "
                "unused here (bounds come from the attributes)"),
           Attr("decrease_axis", INTS, (), "sliced axes of size 1 to drop from Out")],
    infer_shape=_slice_shape, case=_slice_case,
    grad=GradOp(reads=["Input"], no_need_buffer=["Input"], grads=("Input",)),
    doc="Out = Input[starts[i]:ends[i] along axes[i]], negative and out-of-range bounds clamped "
        "as Python slicing does; axes in decrease_axis dropped")

register_op(
    "stack", inputs=[Slot("X", "tensors of one shape and dtype", duplicable=True)],
    outputs=["Y"],
    attrs=[Attr("axis", INT, 0, "where the new axis goes in Y; negative counts from the end")],
    infer_shape=_stack_shape, grad=GradOp(), case=_stack_case,
    doc="Y = X[0], X[1], ... stacked along a new axis: Y.shape[axis] = len(X)")


# ---- squeeze2, unsqueeze2, flatten_contiguous_range: reshapes with an XShape ----

def _squeeze2_shape(ctx):
    x, axes = ctx.input("X"), ctx.attrs["axes"]
    rank = len(x.shape)
    if not axes:
        drop = {i for i, n in enumerate(x.shape) if n == 1}
    else:
        # a named unknown (-1) dim is taken to be 1, as Paddle does at compile time
        drop = {i for i in (normalize_axis(ctx, a, rank, f"axes[{k}]")
                            for k, a in enumerate(axes))
                if rank and x.shape[i] in (1, -1)}
    ctx.set_output("Out", [n for i, n in enumerate(x.shape) if i not in drop], x.dtype)
    ctx.set_output("XShape", xshape(x), x.dtype)


def _squeeze2_case(d):
    shape = d.shape(0, 4, 1, 3)
    rank = len(shape)
    axes = [i - rank if d.boolean() else i for i in range(rank) if d.boolean()]
    return {"X": d.floats(shape)}, {"axes": axes}


def _unsqueeze2_shape(ctx):
    reject_tensor(ctx, "AxesTensor", "axes")
    reject_tensor(ctx, "AxesTensorList", "axes")
    x, axes = ctx.input("X"), ctx.attrs["axes"]
    shape = unsqueezed(x.shape, axes)
    if shape is None:
        raise ctx.error(f"attribute axes={list(axes)} is out of range for X {fmt(x.shape)}: "
                        f"expected each axis in [-rank - 1, rank] of the shape grown so far")
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("XShape", xshape(x), x.dtype)


def _unsqueeze2_case(d):
    shape = d.shape(0, 3)
    axes = []
    for _ in range(d.integer(1, 3)):
        rank = len(shape) + len(axes)
        axes.append(d.integer(-rank - 1, rank))
    return {"X": d.floats(shape)}, {"axes": axes}


def _flatten_shape(ctx):
    x = ctx.input("X")
    rank = len(x.shape)
    if rank == 0:
        shape = (1,)
    else:
        start = normalize_axis(ctx, ctx.attrs["start_axis"], rank, "start_axis")
        stop = normalize_axis(ctx, ctx.attrs["stop_axis"], rank, "stop_axis")
        if start > stop:
            raise ctx.error(f"attribute start_axis={ctx.attrs['start_axis']} comes after "
                            f"stop_axis={ctx.attrs['stop_axis']} in X {fmt(x.shape)}")
        merged = x.shape[start:stop + 1]
        shape = x.shape[:start] + (-1 if -1 in merged else math.prod(merged),) + \
            x.shape[stop + 1:]
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("XShape", xshape(x), x.dtype)


def _flatten_case(d):
    shape = d.shape(0, 4)
    rank = max(len(shape), 1)
    start = d.integer(0, rank - 1)
    stop = d.integer(start, rank - 1)
    start, stop = (start - rank if d.boolean() else start), (stop - rank if d.boolean() else stop)
    return {"X": d.floats(shape)}, {"start_axis": start, "stop_axis": stop}


def _reshape_grad():
    """X@GRAD = Out@GRAD reshaped to X's shape, which XShape carries (as reshape2_grad)."""
    return GradOp(reads=["XShape"], no_need_buffer=["XShape"], grads=("X",))


register_op(
    "squeeze2", inputs=["X"], outputs=["Out", XSHAPE],
    attrs=[Attr("axes", INTS, (), "size-1 axes to drop (others are kept); empty: all of them")],
    infer_shape=_squeeze2_shape, grad=_reshape_grad(), case=_squeeze2_case,
    doc="Out = X without the size-1 dims named in axes (every size-1 dim if axes is empty)")

register_op(
    "unsqueeze2",
    inputs=["X", Slot("AxesTensor", "axes as a 1-D int tensor (not supported)", dispensable=True),
            Slot("AxesTensorList", "axes as 1-element tensors (not supported)", duplicable=True,
                 dispensable=True)],
    outputs=["Out", XSHAPE],
    attrs=[Attr("axes", INTS, (), "where to insert size-1 dims, one after another")],
    infer_shape=_unsqueeze2_shape, grad=_reshape_grad(), case=_unsqueeze2_case,
    doc="Out = X with a size-1 dim inserted at each of axes in turn (negative: from the end)")

register_op(
    "flatten_contiguous_range", inputs=["X"], outputs=["Out", XSHAPE],
    attrs=[Attr("start_axis", INT, 1, "first axis to merge"),
           Attr("stop_axis", INT, 1, "last axis to merge (inclusive)")],
    infer_shape=_flatten_shape, grad=_reshape_grad(), case=_flatten_case,
    doc="Out = X with dims start_axis..stop_axis merged into one (a 0-D X becomes shape (1,))")
