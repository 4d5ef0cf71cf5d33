"""The converters, by family; importing this package fills ``tape.onnx.table.CONVERTERS``."""
from . import creation, math, nn, rearrange, relu_variants, tensor, vision  # noqa: F401
