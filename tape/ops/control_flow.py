"""Control flow in programs (Paddle's names, slots and attributes): ``while`` and
``conditional_block`` run a sub-block, ``select_input`` / ``select_output`` pick a branch's value,
``write_to_array`` / ``read_from_array`` / ``lod_array_length`` work on tensor arrays, and
``increment`` steps a counter.

All but ``increment`` are *executor ops*, as in Paddle (OperatorBase, not OperatorWithKernel):
they read and write the scope itself — a sub-block runs in a child scope, an array is written in
place, only the chosen branch's value exists — so no kernel over arrays can run them. The static
Executor runs them (``tape.static.control_flow``); their shape rules check the slots before any
run. They cannot be checked as one op by the generic op test, so ``EXECUTOR_OPS`` lists them
and ``tests/static/test_control_flow*.py`` checks each, forward and gradient, in programs.

Gradients: ``while_grad`` and ``conditional_block_grad`` run the gradient block that static
``append_backward`` writes for the forward block (``tape.static.control_flow_grad``);
``select_input`` and ``select_output`` are each other's gradient, as in Paddle.
"""
from .. import dtypes
from ..attribute import BLOCK, BOOLEAN, FLOAT, STRINGS, Attr
from ..desc import OpDesc, grad_name
from ..registry import GradMaker, Slot, register_op
from .rules import fmt

SUB_BLOCK = "sub_block"
# Paddle's: names the gradient block must keep alive (its garbage collector's list)
SKIP_EAGER_DELETION_VARS = "skip_eager_deletion_vars"

EXECUTOR_OPS = frozenset((
    "while", "while_grad", "conditional_block", "conditional_block_grad", "select_input",
    "select_output", "write_to_array", "read_from_array", "lod_array_length"))


def _scalar_index(ctx, slot: str) -> None:
    d = ctx.input(slot)
    if d.dtype not in (dtypes.INT32, dtypes.INT64) or len(d.shape) > 1 or \
            (d.shape and d.shape[0] not in (1, -1)):
        raise ctx.error(f"input {slot} ({d.name}) must be one int32/int64 element ([1] or 0-D), "
                        f"received {dtypes.name(d.dtype)} {fmt(d.shape)}")


def _no_shape(ctx) -> None:
    """Executor ops whose outputs follow the sub-block's run: nothing to check up front."""


def _select_input_shape(ctx):
    _scalar_index(ctx, "Mask")
    first = ctx.inputs("X")[0]
    ctx.set_output("Out", first.shape, first.dtype)


def _mask_shape(ctx):
    _scalar_index(ctx, "Mask")


def _array_index_shape(ctx):
    _scalar_index(ctx, "I")


def _array_length_shape(ctx):
    ctx.set_output("Out", (1,), dtypes.INT64)


class SelectGrad(GradMaker):
    """select_input's gradient is select_output of Out@GRAD (to the chosen X@GRAD) and the
    other way round, as Paddle's makers write them."""

    grads = ("X",)
    reads = frozenset(("Mask",))
    keeps = reads

    def __init__(self, grad_type: str):
        self.grad_type = grad_type

    def make(self, op: OpDesc) -> list[OpDesc]:
        return [OpDesc(self.grad_type,
                       {"X": [grad_name(n) for n in op.outputs["Out"]], "Mask": op.inputs["Mask"]},
                       {"Out": [grad_name(n) for n in op.inputs["X"]]}, {})]


class BlockGrad(GradMaker):
    """Marks ``while`` and ``conditional_block`` as differentiable: their grad op needs the
    forward block's gradient block, which only static ``append_backward`` can write
    (``tape.static.control_flow_grad``); ``make`` is never asked."""

    grads = ("X", "Input")

    def make(self, op: OpDesc) -> list[OpDesc]:
        raise NotImplementedError(f"{op.type}: its gradient is written by static "
                                  f"append_backward, which differentiates the sub-block")


_BLOCK_ATTR = Attr(SUB_BLOCK, BLOCK, None, "the block the op runs")
_IS_TEST = Attr("is_test", BOOLEAN, False, "inference only: no step scopes kept for backward")
_SKIP = Attr(SKIP_EAGER_DELETION_VARS, STRINGS, (), "Paddle's garbage collector: names to keep")

register_op(
    "while",
    inputs=[Slot("X", "every variable of enclosing blocks the sub-block reads", duplicable=True),
            Slot("Condition", "bool [1]: run the sub-block again while True; the sub-block "
                 "rewrites it", duplicable=True)],
    outputs=[Slot("Out", "the variables of enclosing blocks the sub-block writes",
                  duplicable=True),
             Slot("StepScopes", "the scope of each iteration (kept for while_grad)")],
    attrs=[_BLOCK_ATTR, _IS_TEST], infer_shape=_no_shape, grad=BlockGrad(),
    doc="while Condition: run sub_block in a fresh child scope (one per iteration).")

register_op(
    "conditional_block",
    inputs=[Slot("Cond", "the condition: a bool scalar with is_scalar_condition, else tensors "
                 "that must all be non-empty", duplicable=True),
            Slot("Input", "the variables of enclosing blocks the sub-block reads",
                 duplicable=True, dispensable=True)],
    outputs=[Slot("Out", "the variables of enclosing blocks the sub-block writes",
                  duplicable=True, dispensable=True),
             Slot("Scope", "the scope the sub-block ran in (kept for conditional_block_grad)")],
    attrs=[_BLOCK_ATTR, Attr("is_scalar_condition", BOOLEAN, False,
                             "Cond is one bool element (else: run if every Cond is non-empty)")],
    infer_shape=_no_shape, grad=BlockGrad(),
    doc="if Cond: run sub_block in a child scope.")

def _forward(slot: str) -> Slot:
    return Slot(slot, f"the forward {slot}", duplicable=True,
                dispensable=slot not in ("X", "Cond"))


def _gradients(slot: str, doc: str = "") -> Slot:
    return Slot(grad_name(slot), doc or f"gradients of the forward {slot}", duplicable=True,
                dispensable=True)


register_op(
    "while_grad",
    inputs=[_forward("X"), _forward("Out"), _gradients("Out"),
            Slot("StepScopes", "the forward iterations' scopes")],
    outputs=[_gradients("X")],
    attrs=[_BLOCK_ATTR, _IS_TEST, _SKIP,
           Attr("original_output_grad", STRINGS, (), "the forward Out's gradient names")],
    infer_shape=_no_shape,
    doc="Run the gradient block in each forward step scope, last to first, carrying the loop "
        "variables' gradients back and summing those of the variables read unchanged.")

register_op(
    "conditional_block_grad",
    inputs=[_forward("Cond"), _forward("Input"), _forward("Out"), _gradients("Out"),
            Slot("Scope", "the forward sub-block's scope")],
    outputs=[_gradients("Input"), _gradients("Cond", "unused (the condition has no gradient)")],
    attrs=[_BLOCK_ATTR, Attr("is_scalar_condition", BOOLEAN, False, "as the forward op's"),
           _SKIP],
    infer_shape=_no_shape,
    doc="If the forward block ran: run its gradient block in a child of its scope; else the "
        "Input gradients are zeros.")

register_op(
    "select_input",
    inputs=[Slot("X", "the candidates (only the chosen one need exist)", duplicable=True),
            Slot("Mask", "int32 [1]: which X")],
    outputs=[Slot("Out", "X[Mask]")],
    infer_shape=_select_input_shape, grad=SelectGrad("select_output"),
    doc="Out = X[Mask] (the merge after a cond's two conditional blocks).")

register_op(
    "select_output",
    inputs=[Slot("X", "the value to route"), Slot("Mask", "int32 [1]: which Out")],
    outputs=[Slot("Out", "the branches: only Out[Mask] is written", duplicable=True)],
    infer_shape=_mask_shape, grad=SelectGrad("select_input"),
    doc="Out[Mask] = X; the other outputs are left as they are.")

register_op(
    "write_to_array",
    inputs=[Slot("X", "the tensor to store"), Slot("I", "int64 [1]: the position")],
    outputs=[Slot("Out", "the tensor array, written in place (grown to I + 1 if shorter)")],
    infer_shape=_array_index_shape,
    doc="Out[I] = X.")

register_op(
    "read_from_array",
    inputs=[Slot("X", "the tensor array"), Slot("I", "int64 [1]: the position"),
            Slot("X_W", "Paddle's: unused", dispensable=True)],
    outputs=[Slot("Out", "X[I]")],
    infer_shape=_array_index_shape,
    doc="Out = X[I].")

register_op(
    "lod_array_length",
    inputs=[Slot("X", "the tensor array")], outputs=[Slot("Out", "int64 [1]")],
    infer_shape=_array_length_shape,
    doc="Out = [len(X)].")


# ---- increment: a kernel op ----

def _increment_shape(ctx):
    x = ctx.input("X")
    if x.shape not in ((), (1,), (-1,)):
        raise ctx.error(f"X ({x.name}) must hold one element ([1] or 0-D), received "
                        f"{fmt(x.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


def _increment_case(d):
    shape = d.choice(((1,), ()))
    x = d.floats(shape) if d.boolean() else d.ints(shape, -5, 5)
    return {"X": x}, {"step": d.choice((1.0, -1.0, 2.0, 0.5))}


class IncrementGrad(GradMaker):
    """X@GRAD = Out@GRAD (a ``scale`` by 1): increment only adds a constant. (Paddle's maker
    writes the reverse step instead, which is not a gradient.)"""

    grads = ("X",)

    def make(self, op: OpDesc) -> list[OpDesc]:
        return [OpDesc("scale", {"X": [grad_name(op.outputs["Out"][0])]},
                       {"Out": [grad_name(op.inputs["X"][0])]},
                       {"scale": 1.0, "bias": 0.0, "bias_after_scale": True})]


register_op(
    "increment", inputs=[Slot("X", "one element")], outputs=[Slot("Out", "X + step")],
    attrs=[Attr("step", FLOAT, 1.0, "what to add")],
    infer_shape=_increment_shape, grad=IncrementGrad(), case=_increment_case,
    doc="Out = X + step, in X's dtype (a loop counter).")
