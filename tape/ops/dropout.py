"""dropout: zero random elements while training, with Paddle's two scaling conventions."""
import math

from .. import dtypes
from ..attribute import BOOLEAN, FLOAT, INT, STRING, Attr, InRange, OneOf
from ..registry import GradOp, Slot, register_op
from .rules import fmt, require_float


def _dropout_shape(ctx):
    x = ctx.input("X")
    require_float(ctx, "X", x)
    if ctx.has_input("Seed"):
        seed = ctx.input("Seed")
        if seed.dtype not in (dtypes.INT32, dtypes.INT64):
            raise ctx.error(f"input Seed ({seed.name}) must be int32 or int64, received "
                            f"{dtypes.name(seed.dtype)}")
        if -1 not in seed.shape and math.prod(seed.shape) != 1:
            raise ctx.error(f"Seed must hold one element, received shape {fmt(seed.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)
    if not ctx.attrs["is_test"]:
        ctx.set_output("Mask", x.shape, dtypes.UINT8)


def _dropout_case(d):
    """Training cases are always seeded (fix_seed or a Seed input), so that the finite
    differences of the gradient check see the mask the gradient saw."""
    attrs = {"dropout_prob": d.choice((0.0, 0.25, 0.5, 0.9, 1.0)), "is_test": d.integer(0, 3) == 0,
             "dropout_implementation": d.choice(("downgrade_in_infer", "upscale_in_train"))}
    inputs = {"X": d.floats(d.shape(1, 4, 1, 5))}
    if d.boolean():
        attrs.update(fix_seed=True, seed=d.integer(1, 2**31 - 1))
    else:
        inputs["Seed"] = d.ints((1,), 1, 2**31 - 1)
    return inputs, attrs


register_op(
    "dropout",
    inputs=[Slot("X", "input"),
            Slot("Seed", "1-element int seed; overrides fix_seed and seed", dispensable=True)],
    outputs=[Slot("Out", "X with dropped elements zeroed, scaled by the implementation"),
             Slot("Mask", "uint8, 1 where X was kept; not written when is_test",
                  intermediate=True)],
    attrs=[Attr("dropout_prob", FLOAT, 0.5, "probability of dropping an element",
                check=InRange(0.0, 1.0)),
           Attr("is_test", BOOLEAN, False, "inference: drop nothing"),
           Attr("dropout_implementation", STRING, "downgrade_in_infer",
                "where the 1 - dropout_prob scaling goes",
                check=OneOf("downgrade_in_infer", "upscale_in_train")),
           Attr("fix_seed", BOOLEAN, False, "draw with the seed attribute"),
           Attr("seed", INT, 0, "the seed when fix_seed; 0 draws from the process generator "
                                "(tape.seed)")],
    infer_shape=_dropout_shape,
    grad=GradOp(reads=["Mask"], no_grad=["Seed"]),
    case=_dropout_case,
    doc="Training: Mask ~ Bernoulli(1 - dropout_prob) per element; Out = X * Mask with "
        "downgrade_in_infer, Out = X * Mask / (1 - dropout_prob) with upscale_in_train (0 when "
        "dropout_prob = 1). is_test: Out = X * (1 - dropout_prob) with downgrade_in_infer, "
        "Out = X with upscale_in_train. The seed is Seed, else seed if fix_seed, else a draw "
        "from the process generator (seed 0 means the same). dX = dOut * the same factor.")
