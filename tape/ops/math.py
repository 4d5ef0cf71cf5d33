"""mul, matmul_v2, scale and sum: products and linear maps."""
import math

from .. import dtypes
from ..attribute import BOOLEAN, FLOAT, INT, AtLeast, Attr
from ..desc import OpDesc
from ..registry import GradMaker, GradOp, Slot, grad_name, register_op
from .rules import fmt, merge_dim, require_float, require_same_dtype


def _require_float_pair(ctx):
    require_float(ctx, "X", ctx.input("X"))
    require_same_dtype(ctx, "X", "Y")


# ---- mul ----

def _flattened(shape, num_col_dims):
    """``shape`` as the 2-D matrix mul sees: the product of the leading ``num_col_dims`` dims by
    the product of the rest (-1 when a dim of that part is unknown)."""
    def product(dims):
        return -1 if -1 in dims else math.prod(dims)
    return product(shape[:num_col_dims]), product(shape[num_col_dims:])


def _mul_shape(ctx):
    _require_float_pair(ctx)
    x, y = ctx.input("X"), ctx.input("Y")
    xn, yn = ctx.attrs["x_num_col_dims"], ctx.attrs["y_num_col_dims"]
    for slot, desc, attr, n in (("X", x, "x_num_col_dims", xn), ("Y", y, "y_num_col_dims", yn)):
        if n >= len(desc.shape):
            raise ctx.error(f"attribute {attr}={n} must be less than the rank of {slot} "
                            f"{fmt(desc.shape)}, which is {len(desc.shape)}")
    x2, y2 = _flattened(x.shape, xn), _flattened(y.shape, yn)
    if x2[1] != y2[0] and -1 not in (x2[1], y2[0]):
        raise ctx.error(f"X flattened to {fmt(x2)} but Y flattened to {fmt(y2)}: X.shape[1] must "
                        f"equal Y.shape[0] (x_num_col_dims={xn}, y_num_col_dims={yn})")
    ctx.set_output("Out", x.shape[:xn] + y.shape[yn:], x.dtype)


def _regroup(d, dims):
    """``dims`` with random runs of neighbours merged into their product."""
    groups = [dims[0]]
    for n in dims[1:]:
        if d.boolean():
            groups[-1] *= n
        else:
            groups.append(n)
    return tuple(groups)


def _mul_case(d):
    """X's trailing dims and Y's leading dims group the same factors differently, so both
    num_col_dims attributes range over 1..rank-1 with X and Y of rank 2-4."""
    factors = d.shape(1, 3, max_side=3)
    x_inner, y_inner = _regroup(d, factors), _regroup(d, factors)
    x_outer = d.shape(1, max(1, 4 - len(x_inner)), max_side=3)
    y_outer = d.shape(1, max(1, min(2, 4 - len(y_inner))), max_side=3)
    inputs = {"X": d.floats(x_outer + x_inner), "Y": d.floats(y_inner + y_outer)}
    return inputs, {"x_num_col_dims": len(x_outer), "y_num_col_dims": len(y_inner)}


_NUM_COL_DIMS = "how many leading dims of {} form the rows of its 2-D view"

register_op(
    "mul", inputs=["X", "Y"], outputs=["Out"],
    attrs=[Attr("x_num_col_dims", INT, 1, _NUM_COL_DIMS.format("X"), check=AtLeast(1)),
           Attr("y_num_col_dims", INT, 1, _NUM_COL_DIMS.format("Y"), check=AtLeast(1))],
    infer_shape=_mul_shape, grad=GradOp(reads=["X", "Y"]), case=_mul_case,
    doc="Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims), shaped "
        "X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:]")


# ---- matmul_v2 ----

def _batch_shape(ctx, x, y, x_batch, y_batch):
    """The broadcast of the batch dims (all but the last two) of X and Y."""
    rank = max(len(x_batch), len(y_batch))
    xb = (1,) * (rank - len(x_batch)) + tuple(x_batch)
    yb = (1,) * (rank - len(y_batch)) + tuple(y_batch)
    out = tuple(merge_dim(a, b) for a, b in zip(xb, yb))
    if None in out:
        raise ctx.error(f"X {fmt(x.shape)} and Y {fmt(y.shape)}: batch dims {fmt(x_batch)} and "
                        f"{fmt(y_batch)} do not broadcast (aligned as {fmt(xb)} and {fmt(yb)})")
    return out


def _matmul_shape(ctx):
    _require_float_pair(ctx)
    x, y = ctx.input("X"), ctx.input("Y")
    trans_x, trans_y = ctx.attrs["trans_x"], ctx.attrs["trans_y"]
    for slot, desc in (("X", x), ("Y", y)):
        if not desc.shape:
            raise ctx.error(f"input {slot} ({desc.name}) must have rank >= 1, received a 0-D "
                            f"tensor")
    # A 1-D X is a row (1, K), a 1-D Y a column (K, 1); their transposes are ignored.
    xs = x.shape if len(x.shape) > 1 else (1,) + x.shape
    ys = y.shape if len(y.shape) > 1 else y.shape + (1,)
    rows, x_inner = (xs[-1], xs[-2]) if trans_x and len(x.shape) > 1 else (xs[-2], xs[-1])
    y_inner, cols = (ys[-1], ys[-2]) if trans_y and len(y.shape) > 1 else (ys[-2], ys[-1])
    if x_inner != y_inner and -1 not in (x_inner, y_inner):
        raise ctx.error(f"X {fmt(x.shape)} (trans_x={trans_x}) contracts a dimension of "
                        f"{x_inner} but Y {fmt(y.shape)} (trans_y={trans_y}) one of {y_inner}: "
                        f"they must be equal")
    out = _batch_shape(ctx, x, y, xs[:-2], ys[:-2])
    out += (rows,) if len(x.shape) > 1 else ()
    out += (cols,) if len(y.shape) > 1 else ()
    ctx.set_output("Out", out, x.dtype)


def _matmul_case(d):
    """1-D or batched operands; batch dims broadcast (some set to 1, one side may be shorter)."""
    m, k, n = d.integer(1, 4), d.integer(1, 4), d.integer(1, 4)
    batch = d.shape(0, 2, max_side=3)
    trans_x, trans_y = d.boolean(), d.boolean()

    def operand(rows, cols, transposed):
        if d.integer(0, 3) == 0:
            return (k,)
        own = batch[d.integer(0, len(batch)):]
        own = tuple(1 if d.integer(0, 2) == 0 else b for b in own)
        return own + ((cols, rows) if transposed else (rows, cols))

    inputs = {"X": d.floats(operand(m, k, trans_x)), "Y": d.floats(operand(k, n, trans_y))}
    return inputs, {"trans_x": trans_x, "trans_y": trans_y}


register_op(
    "matmul_v2", inputs=["X", "Y"], outputs=["Out"],
    attrs=[Attr("trans_x", BOOLEAN, False, "use X with its last two dims swapped"),
           Attr("trans_y", BOOLEAN, False, "use Y with its last two dims swapped")],
    infer_shape=_matmul_shape, grad=GradOp(reads=["X", "Y"]), case=_matmul_case,
    doc="Out = op(X) @ op(Y) with numpy matmul semantics: batch dims broadcast, a 1-D X is a "
        "row and a 1-D Y a column whose unit dim is dropped from Out; op transposes the last "
        "two dims when trans_x / trans_y is set")


# ---- scale and sum: their gradients are scale ops, as in Paddle ----

def _scale_op(src: str, dst: str, scale) -> OpDesc:
    return OpDesc("scale", {"X": [src]}, {"Out": [dst]},
                  {"scale": scale, "bias": 0.0, "bias_after_scale": True})


class ScaleGrad(GradMaker):
    """X@GRAD = scale * Out@GRAD, written as a ``scale`` op (Paddle's ScaleGradMaker)."""

    grads = ("X",)
    depends_on_attrs = True

    def make(self, op):
        return [_scale_op(grad_name(op.outputs["Out"][0]), grad_name(op.inputs["X"][0]),
                          op.attrs["scale"])]


class SumGrad(GradMaker):
    """Each X[i]@GRAD = Out@GRAD, one ``scale`` op with scale 1 each (Paddle's SumGradDescMaker)."""

    grads = ("X",)

    def make(self, op):
        out_grad = grad_name(op.outputs["Out"][0])
        return [_scale_op(out_grad, grad_name(x), 1.0) for x in op.inputs["X"]]


_SCALABLE = (*dtypes.FLOATING, dtypes.INT32, dtypes.INT64)


def _scale_shape(ctx):
    x = ctx.input("X")
    if x.dtype not in _SCALABLE:
        raise ctx.error(f"input X ({x.name}) must be floating point, int32 or int64, received "
                        f"{dtypes.name(x.dtype)}")
    if ctx.has_input("ScaleTensor") or ctx.has_input("BiasTensor"):
        raise ctx.error("inputs ScaleTensor and BiasTensor are not supported; pass the scale "
                        "and bias attributes")
    ctx.set_output("Out", x.shape, x.dtype)


def _scale_case(d):
    attrs = {"scale": d.choice((-2.5, -1.0, 0.0, 0.5, 1.0, 3.0)),
             "bias": d.choice((0.0, -1.5, 0.25)), "bias_after_scale": d.boolean()}
    # integer X too: a loop counter's `i + 1` in Paddle's while programs
    x = d.floats(d.shape(1, 4)) if d.boolean() else d.ints(d.shape(1, 4), -9, 9)
    return {"X": x}, attrs


register_op(
    "scale", inputs=["X", Slot("ScaleTensor", "not supported", dispensable=True),
                     Slot("BiasTensor", "not supported", dispensable=True)],
    outputs=["Out"],
    attrs=[Attr("scale", FLOAT, 1.0, "the factor"), Attr("bias", FLOAT, 0.0, "the offset"),
           Attr("bias_after_scale", BOOLEAN, True, "add bias after scaling (else before)")],
    infer_shape=_scale_shape, grad=ScaleGrad(), case=_scale_case,
    doc="Out = scale * X + bias if bias_after_scale, else scale * (X + bias); for integer X, "
        "scale and bias are cast to X's type first (toward zero), as in Paddle")


def _same_shape(a, b):
    """``a`` and ``b`` as one shape, unknown (-1) dims taken from the other; None if they differ."""
    if len(a) != len(b) or any(m != n and -1 not in (m, n) for m, n in zip(a, b)):
        return None
    return tuple(n if m == -1 else m for m, n in zip(a, b))


def _sum_shape(ctx):
    xs = ctx.inputs("X")
    first = xs[0]
    require_float(ctx, "X", first)
    shape = first.shape
    for i, x in enumerate(xs[1:], 1):
        if x.dtype != first.dtype:
            raise ctx.error(f"X[{i}] ({x.name}) is {dtypes.name(x.dtype)} but X[0] ({first.name}) "
                            f"is {dtypes.name(first.dtype)}: all inputs must share a dtype")
        merged = _same_shape(shape, x.shape)
        if merged is None:
            raise ctx.error(f"X[{i}] ({x.name}) has shape {fmt(x.shape)} but X[0] ({first.name}) "
                            f"has {fmt(first.shape)}: all inputs must have the same shape")
        shape = merged
    ctx.set_output("Out", shape, first.dtype)


def _sum_case(d):
    shape = d.shape(1, 4)
    return {"X": [d.floats(shape) for _ in range(d.integer(1, 4))]}, {}


register_op("sum", inputs=[Slot("X", "same-shape tensors", duplicable=True)], outputs=["Out"],
            infer_shape=_sum_shape, grad=SumGrad(), case=_sum_case,
            doc="Out = X[0] + X[1] + ... (inputs of one shape and dtype)")
