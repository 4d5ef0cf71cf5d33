"""Control flow with Paddle's names: ``while_loop(cond, body, loop_vars)`` and
``cond(pred, true_fn, false_fn)``.

Run eagerly they are Python control flow on the tape: the loop runs, the branch is taken, and
backward goes through the ops that ran. Under ``tape.static.trace`` they record what Paddle's do:
``while`` with the body (and the condition's recomputation) as a sub-block that writes the loop
variables in place; ``conditional_block`` twice (on ``pred`` and on ``logical_not(pred)``) with a
branch each, merged by ``select_input``. The program then loops and branches on the values it is
run with, not on the example's; while tracing, the example's own trip count and branch give the
values that later ops compute with.
"""
from __future__ import annotations

from .. import dtypes, ops
from ..desc import STEP_SCOPES, BlockDesc, OpDesc, VarDesc
from ..errors import InvalidArgumentError
from ..names import unique_name
from ..ops.control_flow import SUB_BLOCK
from ..place import host_array
from ..tape import get_global_tape
from ..variable import Variable, new_variable
from .program import OP_ROLE


def while_loop(cond, body, loop_vars, is_test: bool = False, name=None) -> list:
    """``while cond(*loop_vars): loop_vars = body(*loop_vars)``; returns the final loop_vars.

    ``cond`` returns a bool Variable with one element; ``body`` returns as many Variables as
    ``loop_vars`` holds (a single one may be returned bare for a single loop variable), each
    of the dtype it replaces. Traced, the loop is one ``while`` op (``is_test``: keep no
    iteration scopes for backward).

    >>> i, s = tape.static.nn.while_loop(lambda i, s: i < 5, lambda i, s: [i + 1, s * 2],
    ...                                  [i, s])
    """
    loop_vars = _variables(loop_vars, "loop_vars")
    if not callable(cond) or not callable(body):
        raise InvalidArgumentError("while_loop: cond and body must be callable")
    tape = get_global_tape()
    if not tape.tracing:
        values = loop_vars
        while _holds(cond(*values), "cond"):
            values = _like(body(*values), values)
        return values
    state = [ops.assign(v) for v in loop_vars]      # the loop writes these, not the caller's
    pred = _condition(cond(*state), "cond")
    before = [(v, v._value) for v in state + [pred]]

    def iteration():
        _assigning(tape, _like(body(*state), state), state)()
        _assigning(tape, [_condition(cond(*state), "cond")], [pred])()

    _, block = _recorded(tape, iteration)
    for v, value in before:
        v._value = value
    while _holds_now(pred):         # the example's values, for the ops after the loop
        _recorded(tape, iteration)
    outer = state + [pred]
    steps = _kind_variable("while_step_scopes", STEP_SCOPES)
    tape.append(BlockOp("while", {"X": reads(block), "Condition": [pred]},
                        {"Out": outer, "StepScopes": [steps]}, {"is_test": bool(is_test)},
                        [(SUB_BLOCK, block, outer)]))
    return state


def cond(pred, true_fn=None, false_fn=None, name=None):
    """``true_fn()`` if ``pred`` (a bool Variable with one element) else ``false_fn()``.

    Both return the same structure: None, a Variable, or a list/tuple of Variables of the
    same dtypes. Traced, both branches are recorded as ``conditional_block`` ops and the
    result is ``select_input`` of the two.

    >>> y = tape.static.nn.cond(x.mean() > 0, lambda: x * 2, lambda: -x)
    """
    for fn, which in ((true_fn, "true_fn"), (false_fn, "false_fn")):
        if fn is not None and not callable(fn):
            raise InvalidArgumentError(f"cond: {which} must be callable or None, received "
                                       f"{type(fn).__name__}")
    tape = get_global_tape()
    if not tape.tracing:
        fn = true_fn if _holds(pred, "pred") else false_fn
        return None if fn is None else fn()
    pred = _condition(pred, "pred")
    taken = _holds_now(pred)
    branches = []
    for fn in (true_fn, false_fn):
        result, block = _recorded(tape, fn or (lambda: None))
        branches.append((result, block))
    (t_result, t_block), (f_result, f_block) = branches
    t_list, f_list = _outputs(t_result, "true_fn"), _outputs(f_result, "false_fn")
    if (t_list is None) != (f_list is None) or (t_list and len(t_list) != len(f_list)):
        raise InvalidArgumentError(
            f"cond: true_fn and false_fn must return the same structure; they returned "
            f"{_describe(t_result)} and {_describe(f_result)}")
    if t_list is None:
        t_list = f_list = []
    for i, (t, f) in enumerate(zip(t_list, f_list)):
        if t.desc.dtype != f.desc.dtype or len(t.shape) != len(f.shape):
            raise InvalidArgumentError(
                f"cond: output {i} is {t.dtype} {list(t.shape)} from true_fn but {f.dtype} "
                f"{list(f.shape)} from false_fn; expected the same dtype and rank")
    not_pred = ops.logical_not(pred)
    merged = []
    for fn_pred, outs, block in ((pred, t_list, t_block), (not_pred, f_list, f_block)):
        results = [_new_like(v, "cond_branch") for v in outs]
        block += _recorded(tape, _assigning(tape, outs, results))[1]
        scope = _kind_variable("cond_scope", STEP_SCOPES)
        tape.append(BlockOp("conditional_block", {"Cond": [fn_pred], "Input": reads(block)},
                            {"Out": results, "Scope": [scope]},
                            {"is_scalar_condition": True}, [(SUB_BLOCK, block, results)]))
        merged.append(results)
    mask = ops.cast(pred, in_dtype=dtypes.BOOL, out_dtype=dtypes.INT32)
    chosen = []
    for t, f in zip(*merged):
        out = _new_like(t if taken else f, "cond_out")
        tape.append(BlockOp("select_input", {"X": [f, t], "Mask": [mask]}, {"Out": [out]},
                            {}, []))
        chosen.append(out)
    if t_result is None:
        return None
    return chosen[0] if isinstance(t_result, Variable) else type(t_result)(chosen)


class BlockOp:
    """A control-flow op recorded while tracing: what ``ProgramBuilder.add_op`` reads of an
    OpHandle (``type``, ``inputs``, ``outputs``, ``attrs``), and ``blocks``, ``[(attribute,
    recorded ops, Variables of enclosing blocks they write)]``, which ``add_blocks`` turns into
    the program's sub-blocks."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "blocks")

    def __init__(self, type: str, inputs: dict, outputs: dict, attrs: dict, blocks: list):
        self.type, self.inputs, self.outputs, self.attrs = type, inputs, outputs, attrs
        self.blocks = blocks

    def add_blocks(self, builder, role: int, parent: int = 0) -> dict:
        """Add this op's sub-blocks (and theirs, nested) to ``builder``; ``{attribute: block
        index}``."""
        return {attr: _describe_block(builder, block, {v.name for v in outer}, parent, role)
                for attr, block, outer in self.blocks}

    def __repr__(self):
        return f"BlockOp({self.type})"


def _describe_block(builder, handles, outer: set, parent: int, role: int) -> int:
    block = BlockDesc(len(builder.blocks) + 1, parent)
    builder.blocks.append(block)
    written = {}
    for h in handles:
        ins = {slot: [builder.name(v) for v in vs] for slot, vs in h.inputs.items()}
        outs = {slot: [builder.name(v) for v in vs] for slot, vs in h.outputs.items()}
        for vs in h.outputs.values():
            written.update((v.name, v) for v in vs)
        attrs = {**h.attrs, OP_ROLE: role}
        if hasattr(h, "add_blocks"):
            attrs.update(h.add_blocks(builder, role, block.idx))
        block.append_op(OpDesc(h.type, ins, outs, attrs))
    for name, v in written.items():
        if name not in outer:
            d = v.desc
            block.add_var(VarDesc(name, d.shape, d.dtype, stop_gradient=d.stop_gradient,
                                  type=d.type))
    return block.idx


def reads(handles) -> list:
    """The Variables that recorded ``handles`` read before any of them writes them: what the
    block takes from enclosing blocks."""
    written, found = set(), {}
    for h in handles:
        for vs in h.inputs.values():
            for v in vs:
                if v.name not in written:
                    found.setdefault(v.name, v)
        for vs in h.outputs.values():
            written.update(v.name for v in vs)
    return list(found.values())


def _recorded(tape, fn):
    """``(fn(), the handles it recorded)``, the handles taken off ``tape``."""
    start = len(tape)
    result = fn()
    return result, tape.take_since(start)


def _assigning(tape, sources: list, targets: list):
    """A function that writes each of ``sources`` into its ``targets`` Variable (``assign``)."""
    def assign_all():
        for source, target in zip(sources, targets):
            tape.add_op("assign", {"X": [source]}, {"Out": [target]})
    return assign_all


def _variables(values, what: str) -> list:
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if not values:
        raise InvalidArgumentError(f"while_loop: {what} must hold at least one Variable")
    for i, v in enumerate(values):
        if not isinstance(v, Variable):
            raise InvalidArgumentError(f"while_loop: {what}[{i}] must be a Variable, received "
                                       f"{type(v).__name__}")
    return values


def _like(new, old: list) -> list:
    """``body``'s result as a list matching the loop variables."""
    new = list(new) if isinstance(new, (list, tuple)) else [new]
    if len(new) != len(old) or not all(isinstance(v, Variable) for v in new):
        raise InvalidArgumentError(f"while_loop: body must return {len(old)} Variable(s), like "
                                   f"loop_vars; it returned {_describe(new)}")
    for i, (n, o) in enumerate(zip(new, old)):
        if n.desc.dtype != o.desc.dtype:
            raise InvalidArgumentError(f"while_loop: body's output {i} is {n.dtype}, but loop "
                                       f"variable {i} is {o.dtype}")
    return new


def _condition(pred, what: str) -> Variable:
    if not isinstance(pred, Variable) or pred.desc.dtype != dtypes.BOOL or \
            pred.shape not in ((), (1,)):
        got = (f"{pred.dtype} {list(pred.shape)}" if isinstance(pred, Variable)
               else type(pred).__name__)
        raise InvalidArgumentError(f"{what} must be a bool Variable with one element ([1] or "
                                   f"0-D), received {got}")
    return pred


def _holds(pred, what: str) -> bool:
    return bool(_condition(pred, what).numpy().reshape(-1)[0])


def _holds_now(pred: Variable) -> bool:
    """The condition's value while tracing (which forbids user code from reading it)."""
    return bool(host_array(pred._value).reshape(-1)[0])


def _outputs(result, which: str):
    if result is None:
        return None
    values = [result] if isinstance(result, Variable) else result
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, Variable) for v in values):
        raise InvalidArgumentError(f"cond: {which} must return None, a Variable or a list/tuple "
                                   f"of Variables, received {_describe(result)}")
    return list(values)


def _describe(result) -> str:
    if isinstance(result, (list, tuple)):
        return f"{type(result).__name__} of {len(result)}"
    return type(result).__name__


def _new_like(v: Variable, prefix: str) -> Variable:
    d = v.desc
    return new_variable(VarDesc(unique_name(prefix), d.shape, d.dtype,
                                stop_gradient=d.stop_gradient), v._value, v._tape, v.place)


def _kind_variable(prefix: str, kind: int) -> Variable:
    return new_variable(VarDesc(unique_name(prefix), type=kind), None, 0)
