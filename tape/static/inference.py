"""Saving a program for deployment, in the files Paddle Inference serves, and loading it back.

``save_inference_model(dirname, program)`` writes ``model.pdmodel`` (the program pruned to its
fetches, with feed/fetch ops and holders, every attribute written, Paddle's versions) and
``model.pdiparams`` (the persistable variables in sorted-name order, save_combine layout), each
atomically. ``load_inference_model(dirname)`` reads both; nothing in either file is executed.
"""
from __future__ import annotations

import os

from .. import dtypes, params
from ..atomic import atomic_write
from ..desc import DENSE_TENSOR, DENSE_TENSOR_ARRAY, FEED_MINIBATCH, FETCH_LIST, ProgramDesc
from ..errors import InvalidArgumentError, NotFoundError
from ..registry import REGISTRY
from .control_flow import visible_block
from .export_rules import for_paddle
from .program import (
    FEED_HOLDER,
    FETCH_HOLDER,
    Program,
    copy_desc,
    desc_of,
    ensure_holder,
    feed_op,
    fetch_op,
    holder_names,
    persistable_names,
    proto_attrs,
    set_is_test,
)
from .prune import prune_marked
from .scope import Scope, global_scope

MODEL_FILE, PARAMS_FILE = "model.pdmodel", "model.pdiparams"


def save_inference_model(dirname, program, feed_names=None, fetch_names=None,
                         scope: Scope | None = None) -> tuple[str, str]:
    """Write ``dirname/model.pdmodel`` and ``dirname/model.pdiparams``; returns their paths.

    The model takes ``feed_names`` and gives ``fetch_names`` (default: the program's own), and
    holds only the ops those fetches need. Parameter values come from ``scope`` (default: the
    program's, else the global scope). Everything Paddle's loaders rely on is checked before
    anything is written.

    >>> program = tape.static.trace(model, example)
    >>> tape.static.save_inference_model("out/", program)
    ('out/model.pdmodel', 'out/model.pdiparams')
    """
    desc = desc_of(program)
    feed_names = list(feed_names if feed_names is not None else holder_names(desc, "feed"))
    fetch_names = list(fetch_names if fetch_names is not None else holder_names(desc, "fetch"))
    if scope is None:
        scope = program.scope if isinstance(program, Program) else global_scope()
    model = inference_desc(desc, feed_names, fetch_names)
    check_inference_desc(model, "save_inference_model")
    values = {}
    for name in persistable_names(model.global_block()):
        values[name] = _checked_value(model.global_block().vars[name], scope.find_var(name))
    data = model.serialize_to_string()
    os.makedirs(dirname, exist_ok=True)
    model_path = os.path.join(dirname, MODEL_FILE)
    params_path = os.path.join(dirname, PARAMS_FILE)
    params.save_params(params_path, values)
    atomic_write(model_path, data)
    return model_path, params_path


def load_inference_model(dirname) -> Program:
    """The Program saved in ``dirname`` (by this library or by Paddle's legacy
    ``save_inference_model``), its parameters in ``program.scope``."""
    model_path = os.path.join(dirname, MODEL_FILE)
    try:
        with params.open_regular(model_path, "model file") as f:
            desc = ProgramDesc.parse_from_string(f.read())
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"load_inference_model: {model_path}: {e}") from None
    check_inference_desc(desc, f"load_inference_model: {model_path}")
    block = desc.global_block()
    expected = [(n, block.vars[n].shape, block.vars[n].dtype)
                for n in persistable_names(block)]
    scope = Scope()
    for name, value in params.load_params(os.path.join(dirname, PARAMS_FILE), expected).items():
        scope.var(name).value = value
    return Program(desc, scope)


def inference_desc(desc: ProgramDesc, feed_names: list, fetch_names: list) -> ProgramDesc:
    """A copy of ``desc`` for deployment: feed ops (col i) for ``feed_names``, fetch ops for
    ``fetch_names``, pruned to what they need, ``is_test`` set (as Paddle's
    save_inference_model does), every proto attribute written, what Paddle's predictor is
    picky about normalised (``export_rules``), Paddle's versions stamped."""
    model = copy_desc(desc)
    block = model.global_block()
    for name in [*feed_names, *fetch_names]:
        if name not in block.vars:
            raise NotFoundError(f"save_inference_model: '{name}' names no variable of the "
                                f"program")
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    for op in ops:
        op.is_target = False
    feeds = [feed_op(n, col) for col, n in enumerate(feed_names)]
    fetches = [fetch_op(n, col) for col, n in enumerate(fetch_names)]
    for op in feeds + fetches:
        op.is_target = True
    block.ops = feeds + ops + fetches
    prune_marked(model, block)
    ensure_holder(block, "feed")    # after the prune: a model without feeds needs it too
    ensure_holder(block, "fetch")
    set_is_test(model)
    for op in block.ops:
        op.is_target = False
    for b in model.blocks:     # sub-blocks (control flow) see their ancestors' variables
        seen = visible_block(model, b)
        for op in b.ops:
            info = REGISTRY.get(op.type)
            if info is not None:
                op.attrs.update(proto_attrs(info, op))
            for_paddle(seen, op, info)
    for name in feed_names:
        block.vars[name].need_check_feed = True
    model.set_paddle_versions()
    return model


def check_inference_desc(desc: ProgramDesc, where: str) -> None:
    """Raise InvalidArgumentError for what Paddle's inference loader would crash or fail on:
    undeclared variables, missing feed/fetch holders, feed/fetch ops without a col."""
    block = desc.global_block()
    if block.idx != 0 or block.parent_idx != -1:
        raise InvalidArgumentError(f"{where}: block 0 must have idx 0 and parent -1, has "
                                   f"{block.idx} and {block.parent_idx}")
    for name, kind in ((FEED_HOLDER, FEED_MINIBATCH), (FETCH_HOLDER, FETCH_LIST)):
        d = block.vars.get(name)
        if d is None or d.type != kind or not d.persistable:
            raise InvalidArgumentError(f"{where}: expected a persistable '{name}' holder "
                                       f"variable of its own kind; Paddle's predictor crashes "
                                       f"without it")
    for b in desc.blocks:
        for i, op in enumerate(b.ops):
            for name in op.input_arg_names() + op.output_arg_names():
                if not _declared(desc, b, name):
                    raise InvalidArgumentError(f"{where}: block {b.idx}, op #{i} ({op.type}) "
                                               f"uses '{name}', which is not declared")
    for op_type, holder in (("feed", FEED_HOLDER), ("fetch", FETCH_HOLDER)):
        ops = [op for op in block.ops if op.type == op_type]
        if op_type == "fetch" and not ops:
            raise InvalidArgumentError(f"{where}: the program has no fetch op, so no output")
        for op in ops:
            holders, moved = (op.input("X"), op.output("Out")) if op_type == "feed" else \
                (op.output("Out"), op.input("X"))
            if holders != [holder] or len(moved) != 1:
                raise InvalidArgumentError(f"{where}: a {op_type} op must move one variable "
                                           f"through the '{holder}' holder, found {op}")
        cols = sorted(op.attrs["col"] if type(op.attrs.get("col")) is int else -1 for op in ops)
        if cols != list(range(len(ops))):
            raise InvalidArgumentError(f"{where}: the {op_type} ops must have the INT attribute "
                                       f"col numbering them 0..{len(ops) - 1}, found {cols}")
    # what the Executor makes at the start of a run: persistables, and empty tensor arrays
    available = {n for n, d in block.vars.items()
                 if d.persistable or d.type == DENSE_TENSOR_ARRAY}
    for i, op in enumerate(block.ops):
        for name in op.input_arg_names():
            if name not in available:
                raise InvalidArgumentError(f"{where}: op #{i} ({op.type}) reads '{name}', which "
                                           f"is not fed, not persistable and not computed by an "
                                           f"earlier op")
        available.update(op.output_arg_names())
    for name, d in block.vars.items():
        if d.type == DENSE_TENSOR and d.persistable and any(n < 0 for n in d.shape):
            raise InvalidArgumentError(f"{where}: persistable variable '{name}' must have a "
                                       f"known shape, has {list(d.shape)}")


def _declared(desc: ProgramDesc, block, name: str) -> bool:
    while True:
        if name in block.vars:
            return True
        if block.parent_idx < 0 or block.parent_idx >= len(desc.blocks) or \
                block.parent_idx == block.idx:
            return False
        block = desc.blocks[block.parent_idx]


def _checked_value(desc, var):
    """The value of persistable ``desc`` in the scope, which must match its shape and dtype."""
    if var is None or var.value is None:
        raise NotFoundError(f"save_inference_model: persistable variable '{desc.name}' has no "
                            f"value in the scope")
    value, dtype = var.value, dtypes.to_numpy(desc.dtype)
    if tuple(value.shape) != desc.shape or value.dtype != dtype:
        raise InvalidArgumentError(
            f"save_inference_model: '{desc.name}' is declared {dtype} {list(desc.shape)} but "
            f"its value in the scope is {value.dtype} {list(value.shape)}")
    return value


