"""The converters, by family; importing this package fills ``tape.onnx.table.CONVERTERS``."""
from . import math, nn, tensor  # noqa: F401
