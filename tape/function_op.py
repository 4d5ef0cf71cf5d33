"""The op a traced function records (``tape.function``): one registered op type per trace.

Its inputs are the function's arguments (``Arg<i>``) and the Variables its ops read that no
argument leads to (``Captured<j>``), its outputs what the function returns (``Out<k>``). Its
shape rule asks the trace's Program at the inputs' shapes (``tape.function_program``), its
kernel runs the Program's plans, and its grad op ``<type>_grad`` runs their grad steps in
reverse, on the values the forward call computed: those are kept while the arrays it was given
live (``ForwardValues``); given other arrays, the grad op runs the traced ops again. The op keeps
only its inputs for backward, as an op of its own would. Its batch rule shares the captured
Variables and concatenates the arguments where the trace is row-wise in them
(``Graph.row_wise``), else stacks them on a new axis 0 where the trace can run for every call
at once so (``tape.function_stacking``), so calls of one trace with the same captured
Variables run as one call on a lazy tape, forward and backward.
"""
from __future__ import annotations

import itertools
import re
import weakref

from . import dtypes
from .batch_rules import CAT, SHARED, STACK, add_rule, drop_rule
from .errors import InvalidArgumentError
from .function_program import Graph
from .place import CPUPlace, CUDAPlace
from .registry import GradOp, Slot, kernel, register_op

_numbers = itertools.count()
_NOT_A_NAME = re.compile(r"\W")


def register_function_op(graph: Graph, name: str):
    """Register the op of traced ``graph`` (of a function called ``name``) and its grad op,
    with their kernels and batch rule; returns its OpInfo.

    Its slots are one Variable each, ``Arg<i>`` for the arguments, ``Captured<j>`` for the
    captured Variables and ``Out<k>`` for the results, so that a call takes the runners'
    positional path (``tape.positional``) and a batch passes each argument and captured
    Variable as one input."""
    op_type = f"function_{_NOT_A_NAME.sub('_', name)}_{next(_numbers)}"
    names = input_slots(graph)
    results = [f"Out{k}" for k in range(len(graph.outputs))]
    info = register_op(
        op_type, transient=True,
        inputs=[Slot(n, "an argument" if n[0] == "A" else "a Variable the function's ops read "
                     "that no argument leads to") for n in names],
        outputs=[Slot(n, "a result") for n in results],
        infer_shape=lambda ctx: _infer_shape(graph, names, results, ctx),
        grad=GradOp(reads=names),
        doc=f"The traced function {name} (tape.function), run as one op.")
    computed = ForwardValues()

    def run_function(inputs):
        program = graph.program_of(inputs)
        env = program.forward(inputs)
        computed.keep(inputs, program, env)
        outputs = program.graph.outputs     # (a stacked Graph's, for calls stacked)
        return env[outputs[0]] if len(results) == 1 else tuple(env[i] for i in outputs)

    def run_function_grad(inputs, out_grads):
        kept = computed.take(inputs)
        if kept is None:
            program = graph.program_of(inputs)
            kept = program, program.forward(inputs)
        grads = kept[0].backward(kept[1], out_grads)
        return grads[0] if len(grads) == 1 else tuple(grads)

    # the kernels' parameters name the slots they read (``tape.kernel_binding``); one for
    # every place: the traced plans are the place's own (a trace is made per place)
    given, gradients = ", ".join(names), ", ".join(f"d{n}" for n in results)
    forward = eval(f"lambda {given}: run([{given}])", {"run": run_function})
    backward = eval(f"lambda {given}, {gradients}: run([{given}], [{gradients}])",
                    {"run": run_function_grad})
    for place in (CPUPlace(), CUDAPlace(0)):
        kernel(op_type, types=dtypes.ALL, place=place)(forward)
        kernel(op_type + "_grad", types=dtypes.ALL, place=place)(backward)
    add_rule(op_type, lambda plan, shapes: _batch_rule(graph, names, shapes), self_stacking=True)
    weakref.finalize(info, drop_rule, op_type)
    return info


def input_slots(graph: Graph) -> list:
    """The input slot names of ``graph``'s op: ``Arg<i>``, then ``Captured<j>``."""
    return [f"Arg{i}" for i in range(graph.arguments)] + \
        [f"Captured{j}" for j in range(graph.inputs - graph.arguments)]


def _infer_shape(graph: Graph, names: list, results: list, ctx) -> None:
    descs = [ctx.input(n) for n in names]
    for d, wants in zip(descs, graph.wants):
        if not (d.stop_gradient or wants):
            raise InvalidArgumentError(
                f"{ctx.op_type}: {d.name} wants a gradient, which the trace does not give it "
                f"(traced with stop_gradient=True)")
    program = graph.program(tuple((d.shape, d.dtype) for d in descs))
    for slot, (shape, dtype) in zip(results, program.output_specs):
        ctx.set_output(slot, shape, dtype)


def _batch_rule(graph: Graph, names: list, shapes: dict):
    given = tuple((tuple(shapes[n][0]), d) for n, d in zip(names, graph.input_dtypes))
    if graph.row_wise(given):
        return {n: CAT if k < graph.arguments else SHARED for k, n in enumerate(names)}
    if graph.stacks():
        return {n: STACK if k < graph.arguments else SHARED for k, n in enumerate(names)}
    return None


class ForwardValues:
    """The Program a forward call ran and the values it computed, per the arrays it was given
    (its grad call asks for neither again), until a grad call on the same arrays takes them
    or the first of those arrays is freed (its ``_Watch`` forgets them). At most ``LIMIT``
    are kept, then they are dropped (a value may be a view that keeps its input alive, and a
    call whose gradient nobody asks for is never taken): a grad call that finds none runs the
    forward again."""

    LIMIT = 1024

    def __init__(self):
        # id(first input) -> (weak refs to the inputs, the first a _Watch; the Program; the
        # values past the inputs)
        self.kept = {}

    def keep(self, inputs: list, program, env: list) -> None:
        try:
            refs = [_Watch(inputs[0], self._forget), *map(weakref.ref, inputs[1:])]
        except TypeError:   # (a numpy scalar: its grad call computes again)
            return
        if len(self.kept) >= self.LIMIT:
            self.kept.clear()
        key = refs[0].key = id(inputs[0])
        self.kept[key] = (refs, program, env[len(inputs):])

    def take(self, inputs: list) -> tuple | None:
        """``(Program, every value)`` of the forward call on ``inputs`` (the same arrays), or
        None."""
        entry = self.kept.pop(id(inputs[0]), None)
        if entry is None:
            return None
        for ref, a in zip(entry[0], inputs):
            if ref() is not a:
                return None
        return entry[1], inputs + entry[2]

    def _forget(self, watch: _Watch) -> None:
        self.kept.pop(watch.key, None)


class _Watch(weakref.ref):
    """A weak reference to a kept call's first input array, with the call's key: its callback
    (``ForwardValues._forget``) runs as the array is freed, while no other array can have
    its id. A call kept again replaces the entry, and the old watch goes with it, uncalled."""

    __slots__ = ("key",)
