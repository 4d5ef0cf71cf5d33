"""Paddle's collective ops over MPI: c_allreduce_sum, c_broadcast and c_identity.

Names, slots and attributes are Paddle's (paddle/fluid/operators/collective). A ring is
Paddle's name for a communicator; Tape has one, ring 0: every process of the job
(``tape.distributed``). ``use_calc_stream`` (which CUDA stream NCCL uses) is kept for the
program's sake and changes nothing over MPI. As in Paddle, the gradient of c_allreduce_sum is
c_identity and that of c_identity is c_allreduce_sum (the pair model parallelism uses: a value
all-reduced in the forward pass is the same on every rank, so is its gradient).

In a world of one process (no ``mpirun``) each op is the identity, which is what it computes on
one rank: that is what the generic op test checks; tests/distributed checks them on 2 ranks.
"""
from .. import world
from ..attribute import BOOLEAN, INT, AtLeast, Attr
from ..desc import OpDesc
from ..registry import GradMaker, grad_name, register_op

_RING_ID = Attr("ring_id", INT, 0, "the communicator: 0, every process of the job",
                check=AtLeast(0))
_CALC_STREAM = Attr("use_calc_stream", BOOLEAN, False,
                    "run on the computation stream (CUDA); no effect over MPI")
_MODEL_PARALLEL = Attr("use_model_parallel", BOOLEAN, False,
                       "used in model parallelism (Paddle's grad maker ignores it too)")


def _collective_shape(ctx):
    ring = ctx.attrs["ring_id"]
    if ring != 0:
        raise ctx.error(f"attribute ring_id={ring} names no communicator; expected 0 (Tape's "
                        f"one ring: every process of the job)")
    root = ctx.attrs.get("root")
    if root is not None and root >= world.world_size():
        raise ctx.error(f"attribute root={root} must be a rank, 0 .. "
                        f"{world.world_size() - 1} (world_size {world.world_size()})")
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


class _SwapGrad(GradMaker):
    """X@GRAD = ``grad_type``(Out@GRAD), the attributes passed on (Paddle's CAllReduceSum and
    CIdentity grad makers)."""

    grads = ("X",)

    def __init__(self, grad_type: str):
        self.grad_type = grad_type

    def make(self, op):
        return [OpDesc(self.grad_type, {"X": [grad_name(op.outputs["Out"][0])]},
                       {"Out": [grad_name(op.inputs["X"][0])]}, dict(op.attrs))]


def _case(d):
    return {"X": d.floats(d.shape())}, {"use_calc_stream": d.boolean()}


register_op(
    "c_allreduce_sum", inputs=["X"], outputs=["Out"],
    attrs=[_RING_ID, _CALC_STREAM, _MODEL_PARALLEL], infer_shape=_collective_shape,
    grad=_SwapGrad("c_identity"), case=_case,
    doc="Out = the sum of X over every rank of ring ring_id (MPI_Allreduce)")

register_op(
    "c_identity", inputs=["X"], outputs=["Out"],
    attrs=[_RING_ID, _CALC_STREAM, _MODEL_PARALLEL], infer_shape=_collective_shape,
    grad=_SwapGrad("c_allreduce_sum"), case=_case,
    doc="Out = X; its gradient is all-reduced (the input side of a model-parallel section)")

register_op(
    "c_broadcast", inputs=["X"], outputs=["Out"],
    attrs=[_RING_ID, Attr("root", INT, 0, "the rank whose X every rank receives",
                          check=AtLeast(0)), _CALC_STREAM],
    infer_shape=_collective_shape,
    case=lambda d: ({"X": d.floats(d.shape())}, {"use_calc_stream": d.boolean()}),
    doc="Out = X of rank root, on every rank of ring ring_id (MPI_Bcast)")
