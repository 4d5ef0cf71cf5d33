"""Reusable pieces of shape rules: pure functions of VarDescs and attributes."""
from __future__ import annotations

from .. import dtypes
from ..geometry import align_shapes


def fmt(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def same_as(slot: str = "X", out: str = "Out"):
    """Rule: ``out`` has the shape and dtype of ``slot``."""
    def rule(ctx):
        x = ctx.input(slot)
        ctx.set_output(out, x.shape, x.dtype)
    rule.__name__ = f"same_as_{slot}"
    return rule


def float_same_as(slot: str = "X", out: str = "Out"):
    """Rule: ``slot`` must be floating; ``out`` takes its shape and dtype."""
    def rule(ctx):
        x = ctx.input(slot)
        require_float(ctx, slot, x)
        ctx.set_output(out, x.shape, x.dtype)
    rule.__name__ = f"float_same_as_{slot}"
    return rule


def require_float(ctx, slot: str, desc) -> None:
    if desc.dtype not in dtypes.FLOATING:
        raise ctx.error(f"input {slot} ({desc.name}) must be floating point, received "
                        f"{dtypes.name(desc.dtype)}")


def require_same_dtype(ctx, slot_a: str, slot_b: str) -> None:
    a, b = ctx.input(slot_a), ctx.input(slot_b)
    if a.dtype != b.dtype:
        raise ctx.error(f"{slot_a} and {slot_b} must have the same dtype, received "
                        f"{dtypes.name(a.dtype)} and {dtypes.name(b.dtype)}")


def require_dtype(ctx, slot: str, code: int) -> None:
    d = ctx.input(slot)
    if d.dtype != code:
        raise ctx.error(f"input {slot} ({d.name}) must be {dtypes.name(code)}, received "
                        f"{dtypes.name(d.dtype)}")


def normalize_axis(ctx, axis: int, rank: int, attr: str = "axis") -> int:
    """``axis`` in ``[-rank, rank)`` as a non-negative index, else an error naming the attribute."""
    if not -rank <= axis < max(rank, 1):
        raise ctx.error(f"attribute {attr}={axis} is out of range for an input of rank {rank} "
                        f"(expected -{rank} <= {attr} < {max(rank, 1)})")
    return axis % rank if rank else 0


def merge_dim(a: int, b: int):
    """One broadcast dimension of two (-1 = unknown), or None when they conflict."""
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    if a == -1 or b == -1:
        return max(a, b)
    return None


def same_dim(a: int, b: int):
    """Two dims that must be equal as one (-1 = unknown matches anything), or None."""
    if a == b or b == -1:
        return a
    return b if a == -1 else None


def broadcast(ctx, x_slot: str = "X", y_slot: str = "Y", axis: int = -1) -> tuple:
    """The broadcast output shape of two inputs under Paddle's ``axis`` rule."""
    x, y = ctx.input(x_slot), ctx.input(y_slot)
    aligned = align_shapes(x.shape, y.shape, axis)
    if aligned is None:
        short, long = sorted((x.shape, y.shape), key=len)
        raise ctx.error(f"attribute axis={axis} cannot place {fmt(short)} inside {fmt(long)} "
                        f"(expected -1 or 0 <= axis <= {len(long) - len(short)})")
    xp, yp = aligned
    out = []
    for i, (a, b) in enumerate(zip(xp, yp)):
        d = merge_dim(a, b)
        if d is None:
            raise ctx.error(f"{x_slot} {fmt(x.shape)} and {y_slot} {fmt(y.shape)} do not "
                            f"broadcast (axis={axis}): aligned as {fmt(xp)} and {fmt(yp)}, "
                            f"dimension {i} is {a} vs {b}")
        out.append(d)
    return tuple(out)


def xshape(x) -> tuple:
    """XShape's shape: (0,) + X.shape, which carries X's shape into the grad op and holds no
    data (reshape2, transpose2, squeeze2, ... keep it instead of X)."""
    return (0,) + tuple(x.shape)
