"""ONNX export: ``tape.onnx.export(program_or_layer, path)`` writes a model that onnxruntime (and
any ONNX runtime) serves; ``exportable_ops()`` lists the Paddle ops it maps (tape/onnx/ops/)."""
from .export import DEFAULT_OPSET, export, to_onnx
from .table import CONVERTERS, NoOnnxMappingError, converts, exportable_ops

__all__ = ["CONVERTERS", "DEFAULT_OPSET", "NoOnnxMappingError", "converts", "export",
           "exportable_ops", "to_onnx"]
