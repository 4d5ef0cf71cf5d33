"""The per-kernel checks the flags turn on: unused inputs and NaN/Inf outputs.

``run_kernel`` stands in for ``kernel.call`` at every kernel-call site (eager forward, eager
backward, the static Executor) when ``flags.checking`` is set.

The unused-input check follows Paddle's UnusedVarCheck (seed: OP Should Not Have Unused Input):
an input an op declares but its kernel never reads keeps its buffer alive for nothing, and for a
grad op it is what the tape keeps until backward. After the kernel, the op's declared inputs
that hold a value are compared with the ones its body reads (``Kernel.reads``), skipping
no-need-buffer slots and the ops in ``tape/unused_var_whitelist.py``.
"""
from __future__ import annotations

import numpy as np

from .errors import PermissionDeniedError, PreconditionNotMetError
from .flags import flags
from .unused_var_whitelist import UNUSED_VAR_WHITELIST

WHITELIST_FILE = "tape/unused_var_whitelist.py"


def run_kernel(info, kernel, ins: dict, attrs: dict, wants, names: dict):
    """``kernel.call(ins, attrs, wants)`` followed by the checks that are on; ``names`` maps
    output slots to their variables, or to their names (for the NaN/Inf message)."""
    if flags["FLAGS_enable_unused_var_check"]:
        result = kernel.call(ins, attrs, wants)
        check_unused_inputs(info, ins, *kernel.reads())
    else:
        result = kernel.call(ins, attrs, wants)
    if flags["FLAGS_check_nan_inf"]:
        check_finite_outputs(info, result, names)
    return result


def _holds_value(value) -> bool:
    if isinstance(value, list):
        return any(v is not None for v in value)
    return value is not None


def check_unused_inputs(info, ins: dict, read, shape_only) -> None:
    """Raise PermissionDeniedError if the op has an input holding a value that its kernel did not
    read (no-need-buffer slots and whitelisted ops excepted)."""
    if info.type in UNUSED_VAR_WHITELIST:
        return
    unused = [s.name for s in info.inputs if not s.no_need_buffer and s.name not in read
              and _holds_value(ins.get(s.name))]
    if unused:
        raise PermissionDeniedError(unused_inputs_message(info.type, unused, shape_only))


def unused_inputs_message(op_type: str, unused: list, shape_only=()) -> str:
    """The seed's message: the op, its unused inputs, and the three ways to fix it."""
    names = ", ".join(unused)
    meta = [n for n in unused if n in shape_only]
    only_shape = f" (the kernel reads only the shape/dtype of {', '.join(meta)})" if meta else ""
    where = (f"the grad maker of {op_type[:-len('_grad')]} (GradOp reads=)"
             if op_type.endswith("_grad") else "the op's inputs (register_op inputs=)")
    return (
        f"Unused input variables check failed: operator {op_type} has input(s) not used: "
        f"{names}; please make sure it(them) is(are) needed{only_shape}. If not, remove it(them) "
        f"from {where}; if only the shape/dtype is used, register it(them) as no-need-buffer "
        f"(Slot(no_need_buffer=True), or GradOp(no_need_buffer=[...])); if the kernel reads "
        f"it(them) on some paths only, add the operator with the reason to the white list in "
        f"{WHITELIST_FILE}. [Hint: expected 0 unused inputs, received {len(unused)}]")


def check_finite_outputs(info, result, names: dict) -> None:
    """Raise PreconditionNotMetError at the first floating output holding a NaN or an Inf."""
    if len(info.outputs) == 1:
        result = (result,)
    for slot, value in zip(info.outputs, result):
        if value is None:
            continue
        for i, array in enumerate(value if slot.duplicable else (value,)):
            # numpy functions dispatch to cupy for a device array
            if getattr(getattr(array, "dtype", None), "kind", "") not in ("f", "c"):
                continue
            finite = np.isfinite(array)
            if finite.all():
                continue
            bad = array.size - int(np.count_nonzero(finite))
            nan = int(np.count_nonzero(np.isnan(array)))
            named = names.get(slot.name) or ()
            name = getattr(named[i], "name", named[i]) if i < len(named) else "?"
            raise PreconditionNotMetError(
                f"FLAGS_check_nan_inf: operator {info.type} output {slot.name} ({name}) holds "
                f"{bad} NaN/Inf value(s) of {array.size} ({nan} NaN, {bad - nan} Inf)")
