"""The table from Paddle ops to ONNX nodes: one converter per op type, and what converters use.

A converter is a function of a ``Converting`` context that adds the ONNX nodes computing one
Paddle op's visible outputs from its inputs::

    @converts("relu")
    def relu(c):
        c.node("Relu", [c.input("X")], [c.output("Out")])

``converts(type, since=opset)`` registers it for ``opset_version >= since``; an op with no
converter for the requested opset is a ``NoOnnxMappingError`` naming the op and the opset.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from .. import dtypes
from ..errors import InvalidArgumentError, TapeError

# The opsets this exporter writes: from ONNX's first with axes-as-input Squeeze/ReduceSum (13)
# up to the newest that the installed onnx package knows.
MIN_OPSET = 13


class NoOnnxMappingError(TapeError, NotImplementedError):
    """A Paddle op that the exporter cannot write at the requested opset."""


class Converter:
    """A registered converter: the function and the first opset it supports."""

    __slots__ = ("fn", "since")

    def __init__(self, fn, since: int):
        self.fn, self.since = fn, since


CONVERTERS: dict[str, Converter] = {}


def converts(*op_types: str, since: int = MIN_OPSET):
    """Register the decorated function as the converter of each of ``op_types``."""
    def register(fn):
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise InvalidArgumentError(f"onnx export: op '{op_type}' already has a "
                                           f"converter")
            CONVERTERS[op_type] = Converter(fn, since)
        return fn
    return register


def exportable_ops() -> list[str]:
    """The Paddle op types that export to ONNX (at some supported opset), sorted."""
    return sorted(CONVERTERS)


def converter(op_type: str, opset: int) -> Converter:
    """The converter of ``op_type`` at ``opset``, else NoOnnxMappingError naming both."""
    conv = CONVERTERS.get(op_type)
    if conv is None:
        raise NoOnnxMappingError(f"onnx export: op '{op_type}' has no ONNX mapping (opset "
                                 f"{opset}); ops that export: {', '.join(exportable_ops())}")
    if opset < conv.since:
        raise NoOnnxMappingError(f"onnx export: op '{op_type}' has no ONNX mapping at opset "
                                 f"{opset}: its mapping needs opset >= {conv.since}")
    return conv


def onnx_dtype(code: int) -> int:
    """The ONNX TensorProto element type of a Paddle VarType code."""
    return helper.np_dtype_to_tensor_dtype(dtypes.to_numpy(code))


class Converting:
    """What a converter sees of one op: its inputs and outputs as ONNX value names, attributes,
    the VarDescs of the program, and ``node`` / ``const`` / ``temp`` to add to the graph."""

    def __init__(self, graph, block, op, attrs: dict):
        self.graph, self.block, self.op, self.attrs = graph, block, op, attrs
        self.opset = graph.opset
        self._inputs = {slot: [graph.current(n) for n in names]
                        for slot, names in op.inputs.items()}
        # an output that names a value already defined (batch norm's MeanOut is its Mean) gets
        # a fresh name, which later ops read instead: ONNX values are assigned once
        self._outputs = {slot: [graph.fresh(n) if graph.is_defined(n) else n for n in names]
                         for slot, names in op.outputs.items()}
        for name, onnx_name in self.renamed_outputs().items():
            graph.source[onnx_name] = name

    def renamed_outputs(self) -> dict:
        """{program name: ONNX name} of the op's outputs."""
        return {n: m for slot, names in self.op.outputs.items()
                for n, m in zip(names, self._outputs[slot])}

    # ---- the op's values ----

    def has_input(self, slot: str) -> bool:
        return bool(self._inputs.get(slot))

    def input(self, slot: str, i: int = 0) -> str:
        return self._inputs[slot][i]

    def inputs(self, slot: str) -> list[str]:
        return list(self._inputs.get(slot, ()))

    def output(self, slot: str, i: int = 0) -> str:
        return self._outputs[slot][i]

    def outputs(self, slot: str) -> list[str]:
        return list(self._outputs.get(slot, ()))

    def wants(self, slot: str) -> bool:
        """Whether the op writes output ``slot`` (an optional output may be left out)."""
        return bool(self._outputs.get(slot))

    def shape(self, name: str) -> tuple:
        """The program's shape of value ``name`` (-1: unknown, as the batch dim)."""
        return tuple(self.block.vars[self.graph.program_name(name)].shape)

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def dtype(self, name: str) -> int:
        """The Paddle VarType code of value ``name``."""
        return self.block.vars[self.graph.program_name(name)].dtype

    def np_dtype(self, name: str) -> np.dtype:
        return dtypes.to_numpy(self.dtype(name))

    # ---- adding to the graph ----

    def temp(self, hint: str = "t") -> str:
        """A fresh value name."""
        return self.graph.fresh(f"{self.op.type}.{hint}")

    def node(self, op_type: str, inputs: list, outputs=None, **attrs) -> str | list[str]:
        """Add an ONNX node; ``outputs`` (names, or a count of fresh ones, default 1). Returns
        its output name (one output) or names."""
        if outputs is None or isinstance(outputs, int):
            outputs = [self.temp(op_type.lower()) for _ in range(outputs or 1)]
        self.graph.nodes.append(helper.make_node(op_type, list(inputs), list(outputs),
                                                 name=self.graph.fresh(op_type), **attrs))
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def const(self, value, dtype=None) -> str:
        """An initializer holding ``value`` (an array or a number; ``dtype`` a numpy dtype)."""
        array = np.asarray(value, dtype=dtype)
        name = self.graph.fresh(f"{self.op.type}.const")
        self.graph.initializers.append(numpy_helper.from_array(array, name))
        return name

    def ints(self, values) -> str:
        """An int64 1-D initializer (axes, shapes, starts, ...)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1))

    def scalar_like(self, value, like) -> str:
        """A 0-D initializer holding ``value`` in the dtype of program value ``like`` (or in
        ``like``, a numpy dtype)."""
        dtype = like if isinstance(like, np.dtype) else self.np_dtype(like)
        return self.const(np.asarray(value, dtype=dtype))

    def cast(self, name: str, code: int, out: str | None = None) -> str:
        """``name`` cast to Paddle dtype ``code``."""
        return self.node("Cast", [name], [out] if out else None, to=onnx_dtype(code))

    def identity(self, name: str, out: str) -> str:
        return self.node("Identity", [name], [out])

    # ---- opset-dependent forms ----

    def reduce(self, onnx_op: str, x: str, axes, keepdims: bool, out: str | None = None) -> str:
        """A Reduce* node over ``axes`` (None: all); axes as an input where the opset wants it
        (ReduceSum from 13, the others from 18)."""
        outs = [out] if out else None
        as_input = self.opset >= (13 if onnx_op == "ReduceSum" else 18)
        if axes is None:
            return self.node(onnx_op, [x], outs, keepdims=int(keepdims))
        if as_input:
            return self.node(onnx_op, [x, self.ints(axes)], outs, keepdims=int(keepdims))
        return self.node(onnx_op, [x], outs, axes=list(axes), keepdims=int(keepdims))

    def unsqueeze(self, x: str, axes, out: str | None = None) -> str:
        return self.node("Unsqueeze", [x, self.ints(axes)], [out] if out else None)

    def squeeze(self, x: str, axes, out: str | None = None) -> str:
        return self.node("Squeeze", [x, self.ints(axes)], [out] if out else None)

    def reshape(self, x: str, shape, out: str | None = None) -> str:
        """Reshape to the program's ``shape``, in which one unknown dim (-1, the batch) is
        inferred; with more unknown dims (or an empty one) there is no fixed target:
        NoOnnxMappingError."""
        shape = list(shape)
        if shape.count(-1) > 1 or (0 in shape and -1 in shape):   # no size to infer -1 from
            raise NoOnnxMappingError(
                f"onnx export: op '{self.op.type}' reshapes to {shape}, with more than one "
                f"unknown dim, or one beside an empty dim (opset {self.opset})")
        return self.node("Reshape", [x, self.ints(shape)], [out] if out else None,
                         **({"allowzero": 1} if 0 in shape and self.opset >= 14 else {}))
