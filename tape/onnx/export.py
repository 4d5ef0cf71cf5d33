"""``tape.onnx.export``: a program (or a layer, traced) as an ONNX model, built with onnx.helper
and checked by onnx.checker before the file is written atomically."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..atomic import atomic_write
from ..desc import ProgramDesc
from ..errors import InvalidArgumentError, NotFoundError
from ..registry import REGISTRY
from ..static import Program, global_scope, trace
from ..static.inference import inference_desc
from ..static.program import holder_names, persistable_names, proto_attrs
from ..variable import Variable
from . import ops  # noqa: F401  (registers the converters)
from .table import MIN_OPSET, Converting, NoOnnxMappingError, converter, onnx_dtype

DEFAULT_OPSET = 17
BATCH = "batch"    # the name of the feeds' dynamic first dim


def export(program_or_layer, path, input_spec=None, opset_version: int = DEFAULT_OPSET) -> str:
    """Write ``program_or_layer`` to ``path`` as an ONNX model; returns ``path``.

    ``program_or_layer`` is a ``tape.static.Program`` (``input_spec``: the feed names to keep,
    default its own feeds) or a layer / function of Variables (``input_spec``: one example per
    input, an array or a Variable, or a ``(shape, dtype)`` pair whose None or -1 dims become
    size 1 while tracing). Layers are traced in eval mode. The model has the feeds' first dim
    dynamic (``batch``), parameters as initializers, inference semantics (dropout off, batch
    norm on its running statistics), and passes ``onnx.checker``. An op without an ONNX
    mapping at ``opset_version`` raises ``NoOnnxMappingError`` naming it, and nothing is
    written.

    >>> tape.onnx.export(model, "build/model.onnx", input_spec=[((None, 64), "float32")])
    """
    model = to_onnx(program_or_layer, input_spec, opset_version)
    atomic_write(path, model.SerializeToString())
    return os.fspath(path)


def to_onnx(program_or_layer, input_spec=None, opset_version: int = DEFAULT_OPSET):
    """The checked ``onnx.ModelProto`` that ``export`` writes."""
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset_version <= newest:
        raise NoOnnxMappingError(f"onnx export: opset {opset_version} is not supported: "
                                 f"expected {MIN_OPSET} <= opset_version <= {newest}")
    program, feeds = _program(program_or_layer, input_spec)
    fetches = list(program.fetch_names) if isinstance(program, Program) else \
        holder_names(program, "fetch")
    scope = program.scope if isinstance(program, Program) else global_scope()
    desc = program.desc if isinstance(program, Program) else program
    model = inference_desc(desc, feeds, fetches)
    graph = _Graph(model.global_block(), scope, opset_version, feeds)
    for op in model.global_block().ops:
        if op.type not in ("feed", "fetch"):
            graph.convert(op)
    proto = helper.make_model(
        graph.make(feeds, fetches), producer_name="tape",
        opset_imports=[helper.make_opsetid("", opset_version)])
    onnx.checker.check_model(proto, full_check=True)
    return proto


def _program(program_or_layer, input_spec):
    """(the Program or ProgramDesc to export, its feed names)."""
    if isinstance(program_or_layer, (Program, ProgramDesc)):
        desc = program_or_layer.desc if isinstance(program_or_layer, Program) else \
            program_or_layer
        feeds = holder_names(desc, "feed") if input_spec is None else list(input_spec)
        if not all(isinstance(n, str) for n in feeds):
            raise InvalidArgumentError(f"onnx export: for a program, input_spec lists feed "
                                       f"names, received {input_spec!r}")
        return program_or_layer, feeds
    if not callable(program_or_layer):
        raise InvalidArgumentError(f"onnx export: expected a Program or a callable layer, "
                                   f"received {type(program_or_layer).__name__}")
    if input_spec is None:
        raise InvalidArgumentError("onnx export: a layer needs input_spec, one example (an "
                                   "array, a Variable or a (shape, dtype) pair) per input")
    examples = [_example(spec, i) for i, spec in enumerate(input_spec)]
    layer = program_or_layer
    training = getattr(layer, "training", None)
    if training:
        layer.eval()
    try:
        program = trace(layer, *examples)
    finally:
        if training:
            layer.train()
    return program, program.feed_names


def _example(spec, i: int):
    if isinstance(spec, (Variable, np.ndarray)):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], (tuple, list)):
        shape, dtype = spec
        return np.ones([1 if n is None or n < 0 else n for n in shape], dtype=dtype)
    raise InvalidArgumentError(f"onnx export: input_spec[{i}] must be an array, a Variable or "
                               f"a (shape, dtype) pair, received {spec!r}")


class _Graph:
    """The nodes, initializers and names of the ONNX graph being built from one block."""

    def __init__(self, block, scope, opset: int, feeds: list):
        self.block, self.scope, self.opset = block, scope, opset
        self.nodes, self.initializers = [], []
        self.used = set(block.vars)
        self.defined = {n for n in persistable_names(block)} | set(feeds)
        self.latest = {}        # program name -> the ONNX value holding its latest value
        self.source = {}        # such an ONNX value -> its program name
        self._count = 0

    def fresh(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"{hint}_{self._count}"
            if name not in self.used:
                self.used.add(name)
                return name

    def current(self, name: str) -> str:
        return self.latest.get(name, name)

    def is_defined(self, name: str) -> bool:
        return name in self.defined

    def program_name(self, name: str) -> str:
        return self.source.get(name, name)

    def convert(self, op) -> None:
        conv = converter(op.type, self.opset)
        info = REGISTRY.get(op.type)
        attrs = proto_attrs(info, op) if info is not None else dict(op.attrs)
        c = Converting(self, self.block, op, attrs)
        conv.fn(c)
        for name, onnx_name in c.renamed_outputs().items():
            self.defined.add(name)
            if onnx_name != name:
                self.latest[name] = onnx_name

    def make(self, feeds: list, fetches: list):
        """The graph: ``feeds`` in, ``fetches`` (their latest values) out."""
        produced = {o for n in self.nodes for o in n.output}
        outputs = []
        for name in fetches:
            value = self.current(name)
            if value not in produced or value in outputs:   # fed, a parameter, or twice
                out = self.fresh(f"{name}.out")
                self.nodes.append(helper.make_node("Identity", [value], [out]))
                value = out
            outputs.append(value)
        read = {i for n in self.nodes for i in n.input}
        for name in persistable_names(self.block):
            if name in read:
                value = self.scope.find_var(name)
                if value is None or value.value is None:
                    raise NotFoundError(f"onnx export: parameter '{name}' has no value in the "
                                        f"scope")
                self.initializers.append(numpy_helper.from_array(np.asarray(value.value),
                                                                 name))
        return helper.make_graph(
            self.nodes, "tape", [self._value_info(n, n, feed=True) for n in feeds],
            [self._value_info(o, f) for o, f in zip(outputs, fetches)], self.initializers)

    def _value_info(self, name: str, program_name: str, feed: bool = False):
        d = self.block.vars[program_name]
        dims = [(BATCH if feed and i == 0 else None) if n < 0 else n
                for i, n in enumerate(d.shape)]
        return helper.make_tensor_value_info(name, onnx_dtype(d.dtype), dims)
