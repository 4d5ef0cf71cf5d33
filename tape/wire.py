"""How values travel in framework.proto: attribute types and fields, Paddle's versions.

Shared by the descriptions' round trip (tape/desc.py); the generated protobuf module is
imported on first use, so ``import tape`` stays fast.
"""
from __future__ import annotations

import numbers

from .attribute import (
    ATTR_TYPE_NAMES,
    BLOCK,
    BLOCKS,
    BOOLEAN,
    BOOLEANS,
    FLOAT,
    FLOATS,
    INT,
    INTS,
    LONG,
    LONGS,
    STRING,
    STRINGS,
)
from .errors import InvalidArgumentError

# AttrType values past those of tape.attribute (Paddle 3.x additions)
FLOAT64S, VAR, VARS, FLOAT64, SCALAR, SCALARS = range(12, 18)
ATTR_NAMES = ATTR_TYPE_NAMES + ("FLOAT64S", "VAR", "VARS", "FLOAT64", "SCALAR", "SCALARS")
# OpDesc.Attr field holding each type's value, and whether it is repeated
ATTR_FIELDS = {INT: ("i", False), FLOAT: ("f", False), STRING: ("s", False),
                INTS: ("ints", True), FLOATS: ("floats", True), STRINGS: ("strings", True),
                BOOLEAN: ("b", False), BOOLEANS: ("bools", True), BLOCK: ("block_idx", False),
                LONG: ("l", False), BLOCKS: ("blocks_idx", True), LONGS: ("longs", True),
                FLOAT64S: ("float64s", True), VAR: ("var_name", False),
                VARS: ("vars_name", True), FLOAT64: ("float64", False),
                SCALAR: ("scalar", False), SCALARS: ("scalars", True)}
# Attributes Paddle puts on every op (not in the ops' own protos); printing leaves them out.
COMMON_ATTRS = {"op_role": INT, "op_role_var": STRINGS, "op_namescope": STRING,
                 "op_callstack": STRINGS, "op_device": STRING, "with_quant_attr": BOOLEAN}

# What PaddlePaddle 3.3.1 writes in ProgramDesc.version and op_version_map (its whole registry).
PADDLE_VERSION = 3003001
PADDLE_OP_VERSIONS = {
    "affine_grid": 1, "allclose": 2, "argsort": 1, "assign_value": 1, "auc": 1, "clip": 1,
    "coalesce_tensor": 2, "collect_fpn_proposals": 1, "conv2d": 1, "conv2d_transpose": 2,
    "conv3d": 1, "conv3d_transpose": 1, "cumprod": 1, "cumsum": 1, "depthwise_conv2d": 1,
    "depthwise_conv2d_transpose": 1, "dequantize": 1, "distribute_fpn_proposals": 2,
    "elementwise_add": 1, "elementwise_div": 1, "elementwise_mul": 1, "elementwise_pow": 1,
    "elementwise_sub": 1, "equal": 1, "fake_channel_wise_quantize_abs_max": 1,
    "fill_constant": 2, "flip": 1, "for_pybind_test__": 4, "gather": 1, "generate_proposals": 2,
    "generate_proposals_v2": 1, "global_gather": 1, "global_scatter": 1, "greater_equal": 1,
    "greater_than": 1, "grid_sampler": 1, "hard_shrink": 1, "histogram": 1, "instance_norm": 1,
    "kldiv_loss": 1, "lamb": 1, "leaky_relu": 1, "less_equal": 1, "less_than": 1, "linspace": 1,
    "lookup_table": 1, "lookup_table_v2": 1, "lstsq": 1, "matmul": 1, "matrix_nms": 1,
    "max_pool2d_with_index": 1, "max_pool3d_with_index": 1, "momentum": 1,
    "moving_average_abs_max_scale": 2, "not_equal": 1, "p_norm": 1, "partial_allgather": 1,
    "pixel_shuffle": 1, "print": 1, "quantize": 2, "requantize": 1, "roi_align": 3,
    "roi_pool": 2, "roll": 2, "round": 1, "seed": 1, "set_value": 4, "softplus": 1,
    "thresholded_relu": 1, "trace": 1, "truncated_gaussian_random": 1, "unique_consecutive": 1,
    "weight_dequantize": 1, "weight_only_linear": 1, "weight_quantize": 1, "yolo_box": 1,
}


def proto_module():
    """The generated protobuf module, imported on first use: ``import tape`` stays fast."""
    from . import framework_pb2
    return framework_pb2


def infer_attr_type(op_type: str, name: str, value) -> int:
    """The AttrType of a Python value, for an attribute no registered op declares."""
    def scalar(v):
        if isinstance(v, bool) or type(v).__name__ == "bool_":
            return BOOLEAN
        if isinstance(v, numbers.Integral):
            return INT if -2**31 <= v < 2**31 else LONG
        if isinstance(v, numbers.Real):
            return FLOAT
        if isinstance(v, str):
            return STRING
        return None
    if isinstance(value, (list, tuple)):
        kinds = {scalar(v) for v in value} or {INT}
        if LONG in kinds and kinds <= {INT, LONG}:
            kinds = {LONG}
        if kinds == {FLOAT, INT}:
            kinds = {FLOAT}
        kind = kinds.pop() if len(kinds) == 1 else None
        found = {INT: INTS, LONG: LONGS, FLOAT: FLOATS, STRING: STRINGS, BOOLEAN: BOOLEANS}.get(
            kind)
    else:
        found = scalar(value)
    if found is None:
        raise InvalidArgumentError(f"op '{op_type}': cannot tell the wire type of attribute "
                                   f"'{name}' from its value {value!r}; expected a bool, int, "
                                   f"float, str or a list of one of them")
    return found


def write_attr(a, op_type: str, name: str, kind: int, value) -> None:
    a.name, a.type = name, kind
    field, repeated = ATTR_FIELDS[kind]
    try:
        if kind == SCALAR:
            _write_scalar(a.scalar, value)
        elif kind == SCALARS:
            for v in value:
                _write_scalar(a.scalars.add(), v)
        elif repeated:
            getattr(a, field).extend(value)
        else:
            setattr(a, field, value)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"op '{op_type}': attribute '{name}' ({ATTR_NAMES[kind]}) "
                                   f"cannot hold {value!r}: {e}") from None


def _write_scalar(s, value) -> None:
    if isinstance(value, bool):
        s.type, s.b = 1, value
    elif isinstance(value, numbers.Integral):
        s.type, s.i = 2, value
    elif isinstance(value, numbers.Real):
        s.type, s.r = 3, value
    elif isinstance(value, complex):
        s.type = 4
        s.c.r, s.c.i = value.real, value.imag
    else:
        raise TypeError(f"{type(value).__name__} is not a scalar")


def read_attr(a):
    field, repeated = ATTR_FIELDS[a.type]
    if a.type == SCALAR:
        return _read_scalar(a.scalar)
    if a.type == SCALARS:
        return tuple(_read_scalar(s) for s in a.scalars)
    value = getattr(a, field)
    return tuple(value) if repeated else value


def _read_scalar(s):
    if s.type == 4:
        return complex(s.c.r, s.c.i)
    return {1: s.b, 2: s.i, 3: s.r}[s.type]
