"""Prepared update ops: a parameter's update with what its signature fixes done once.

An optimizer's step runs one update op per parameter, every step, on the same Variables (the
parameter, its state, the learning rate) and a gradient of the same shape. Through the eager
runner each of them re-checks its slots, rebuilds its signature and looks up its CallPlan
(about 8 us of a small update's 10). A PreparedUpdate keeps the CallPlan (from
``dispatch.infer``, as the runner's) and the Variables the op reads and writes, so a later step
only checks that the parameter and gradient still fit it and calls the kernel
(``CallPlan.direct``, the runner's call when no check is on).
"""
from __future__ import annotations

from tape.dispatch import infer
from tape.registry import op_info


class _Unprepared:
    """What a parameter whose update op cannot be prepared has: it takes the runner every
    step."""

    __slots__ = ()

    @staticmethod
    def run(param, grad) -> bool:
        return False


UNPREPARED = _Unprepared()


class PreparedUpdate:
    """``run(param, grad)`` runs the update op prepared for one parameter on a new gradient."""

    __slots__ = ("plan", "param", "reads", "grad_at", "writes", "run")

    def __init__(self, plan, param, reads: list, grad_at: int, writes: list):
        self.plan, self.param, self.reads, self.grad_at = plan, param, reads, grad_at
        self.writes = writes    # (output position, Variable) in the kernel's output order
        grad = reads[grad_at]
        reads[grad_at] = None   # (each step's gradient goes there: this one is not kept)
        self.run = _written_run(plan, param, grad.desc, reads, grad_at, writes)


def _written_run(plan, param, grad_desc, reads: list, grad_at: int, writes: list):
    """``run(param, grad)`` of a PreparedUpdate, written out for its Variables: updates
    ``param`` with ``grad`` and returns True. It returns False, having changed nothing, unless
    ``param`` is the prepared parameter and both still have the signature the plan was made for
    and are values the runner would take without a question (computed, and no stale input),
    and when a value it reads is still pending on a lazy op (the runner computes it first).
    The check and one line per input, instead of method calls and a loop over the inputs: a
    small parameter's update costs about 1.5 us less."""
    lines = ["def run(param, grad):",
             "    gd = grad.desc",
             "    if not (param is prepared and gd.shape == grad_shape and gd.dtype == dtype",
             "            and gd.stop_gradient and grad.place is place",
             "            and grad._value is not None and not param._tape",
             "            and param.desc.shape == param_shape and param.place is place):",
             "        return False"]
    arrays = []
    namespace = {"direct": plan.direct, "attrs": plan.attrs, "prepared": param,
                 "grad_shape": grad_desc.shape, "dtype": grad_desc.dtype,
                 "param_shape": param.desc.shape, "place": param.place}
    for i, v in enumerate(reads):
        if i == grad_at:
            arrays.append("grad._value")
        elif v is None:         # an absent optional slot
            arrays.append("None")
        else:
            namespace[f"r{i}"] = v
            lines += [f"    a{i} = r{i}._value", f"    if a{i} is None:", "        return False"]
            arrays.append(f"a{i}")
    lines.append(f"    result = direct(attrs, None, {', '.join(arrays)})")
    for k, (at, v) in enumerate(writes):
        namespace[f"w{k}"] = v
        value = "result" if len(plan.outputs) == 1 else f"result[{at}]"
        lines.append(f"    w{k}._value, w{k}._tape = {value}, 0")
    lines.append("    return True")
    exec(compile("\n".join(lines), f"<prepared update of {plan.info.type}>", "exec"), namespace)
    return namespace["run"]


def prepare(op_type: str, inputs: dict, outputs: dict, attrs: dict, param, grad):
    """The PreparedUpdate of an update op ``(op_type, inputs, outputs, attrs)`` as
    ``Optimizer.update_op`` returns it, or UNPREPARED when it is not one Variable per slot with
    ``grad`` itself among the inputs (an op fed a gradient made afresh each step, as Adam's
    coupled weight decay makes one, must go through the runner)."""
    info = op_info(op_type)
    reads, grad_at = [], None
    for slot in info.input_names:
        vs = inputs.get(slot)
        if vs and len(vs) != 1:
            return UNPREPARED
        v = vs[0] if vs else None
        if v is grad:
            grad_at = len(reads)
        reads.append(v)
    if grad_at is None or any(len(vs) != 1 for vs in outputs.values() if vs):
        return UNPREPARED
    attrs, attrs_key = info.checked_attrs(attrs)
    descs = {slot: [v.desc] for slot, v in zip(info.input_names, reads) if v is not None}
    plan = infer(info, attrs, attrs_key, descs, param.place)
    writes = [(at, outputs[slot][0]) for at, (slot, _, specs, _) in enumerate(plan.outputs)
              if specs and outputs.get(slot)]
    return PreparedUpdate(plan, param, reads, grad_at, writes)
