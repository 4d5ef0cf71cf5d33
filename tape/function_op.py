"""The op a traced function records (``tape.function``): one registered op type per trace.

Its inputs are ``Args`` (the function's arguments) and ``Captured`` (the Variables its ops read
that no argument leads to), its output ``Out`` (what the function returns). Its shape rule asks
the trace's Program at the inputs' shapes (``tape.function_program``), its kernel runs the
Program's plans, and its grad op ``<type>_grad`` runs them again and then their grad steps in
reverse: the op keeps only its inputs, as an op of its own would, and no forward value of the
traced ops outlives the call. Its batch rule concatenates the arguments and shares the captured
Variables where the trace is row-wise in its arguments (``Graph.row_wise``), so calls of one
trace with the same captured Variables run as one call on a lazy tape, forward and backward.
"""
from __future__ import annotations

import itertools
import re

from . import dtypes
from .batch_rules import CAT, SHARED, add_rule
from .errors import InvalidArgumentError
from .function_program import Graph
from .registry import GradOp, Slot, kernel, register_op

_numbers = itertools.count()
_NOT_A_NAME = re.compile(r"\W")


def register_function_op(graph: Graph, name: str):
    """Register the op of traced ``graph`` (of a function called ``name``) and its grad op,
    with their kernels and batch rule; returns its OpInfo."""
    op_type = f"function_{_NOT_A_NAME.sub('_', name)}_{next(_numbers)}"
    arguments = graph.arguments
    info = register_op(
        op_type,
        inputs=[Slot("Args", "the function's arguments", duplicable=True),
                Slot("Captured", "the Variables its ops read that no argument leads to",
                     duplicable=True, dispensable=True)],
        outputs=[Slot("Out", "what the function returns", duplicable=True)],
        infer_shape=lambda ctx: _infer_shape(graph, ctx),
        grad=GradOp(reads=["Args", "Captured"]),
        doc=f"The traced function {name} (tape.function), run as one op.")

    def run_function(Args, Captured):
        inputs = Args + Captured if Captured else Args
        env = graph.program_of(inputs).forward(inputs)
        return [env[i] for i in graph.outputs]

    def run_function_grad(Args, Captured, dOut):
        inputs = Args + Captured if Captured else Args
        program = graph.program_of(inputs)
        grads = program.backward(program.forward(inputs), dOut)
        return grads[:arguments], grads[arguments:]

    kernel(op_type, types=dtypes.ALL)(run_function)
    kernel(op_type + "_grad", types=dtypes.ALL)(run_function_grad)
    add_rule(op_type, lambda plan, shapes: _batch_rule(graph, shapes))
    return info


def _infer_shape(graph: Graph, ctx) -> None:
    descs = ctx.inputs("Args") + ctx.inputs("Captured")
    if len(descs) != graph.inputs:
        raise ctx.error(f"the trace takes {graph.arguments} argument(s) and "
                        f"{graph.inputs - graph.arguments} captured Variable(s); received "
                        f"{len(ctx.inputs('Args'))} and {len(ctx.inputs('Captured'))}")
    for d, wants in zip(descs, graph.wants):
        if not (d.stop_gradient or wants):
            raise InvalidArgumentError(
                f"{ctx.op_type}: {d.name} wants a gradient, which the trace does not give it "
                f"(traced with stop_gradient=True)")
    program = graph.program(tuple((d.shape, d.dtype) for d in descs))
    ctx.set_outputs("Out", program.output_specs)


def _batch_rule(graph: Graph, shapes: dict):
    given = shapes["Args"] + shapes.get("Captured", [])
    if not graph.row_wise(tuple((tuple(s), d) for s, d in zip(given, graph.input_dtypes))):
        return None
    return {"Args": CAT, **({"Captured": SHARED} if "Captured" in shapes else {})}
