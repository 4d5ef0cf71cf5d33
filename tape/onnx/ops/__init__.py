"""The converters, by family; importing this package fills ``tape.onnx.table.CONVERTERS``."""
from . import math, nn, rearrange, relu_variants, tensor  # noqa: F401
