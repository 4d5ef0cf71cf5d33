"""Operator definitions, and ``tape.ops.<type>(...)`` made from the registry.

Each generated function takes the op's inputs positionally in slot order (a list for a
duplicable slot, None to skip a dispensable one; slots may also be given by name) and its
attributes as keywords, runs the op on the global tape and returns its non-intermediate outputs:
one Variable, or a tuple in proto order.
"""
import builtins
import inspect

from ..registry import REGISTRY
from ..tape import _local, get_global_tape

# each family registers its ops on import
from . import (  # noqa: F401
    activation,
    collective,
    compare,
    control_flow,
    conv,
    creation,
    dropout,
    elementwise,
    embedding,
    framework,
    indexing,
    interp,
    io,
    loss,
    manipulation,
    math,
    norm,
    optimizer,
    pad,
    pool,
    rearrange,
    reduce,
    relu_variants,
    rnn,
    tensor,
)


def _make_op_function(info):
    layout = tuple((s.name, s.duplicable) for s in info.inputs)
    duplicable = dict(layout)
    visible_slots = [s for s in info.outputs if not s.intermediate]
    single = visible_slots[0].name if len(visible_slots) == 1 else None
    single_list = single is not None and visible_slots[0].duplicable

    def op(*args, **attrs):
        if len(args) > len(layout):
            raise TypeError(f"{info.type} takes at most {len(layout)} inputs "
                            f"({', '.join(info.input_names)}), received {len(args)}")
        inputs = {}
        for (slot, many), arg in zip(layout, args):
            if arg is not None:
                inputs[slot] = list(arg) if many else [arg]
        if attrs and not duplicable.keys().isdisjoint(attrs):
            for name in [k for k in attrs if k in duplicable]:
                arg = attrs.pop(name)
                inputs[name] = list(arg) if duplicable[name] else [arg]
        out = (_local.tape or get_global_tape()).run(info, inputs, attrs)
        if single is not None:
            written = out.get(single)
            if single_list:
                return written
            return written[0] if written else None
        return tuple(_slot_result(out.get(s.name), s.duplicable) for s in visible_slots)

    op.__name__ = op.__qualname__ = info.type
    op.__doc__ = _signature_doc(info)
    op.__signature__ = _signature(info)
    return op


def _signature(info) -> inspect.Signature:
    """What ``help()`` and IDEs show: the input slots (dispensable ones default to None), then
    the attributes as keywords with their defaults (required ones without)."""
    # a grad op's slot such as Out@GRAD is shown as Out_GRAD (it is passed by position)
    slots = [inspect.Parameter(s.name.replace("@", "_"), inspect.Parameter.POSITIONAL_OR_KEYWORD,
                               default=None if s.dispensable else inspect.Parameter.empty)
             for s in info.inputs]
    # a required slot after a dispensable one: Python signatures allow no default before it
    for i in builtins.range(len(slots) - 1, 0, -1):   # the module's own range is the op
        if slots[i - 1].default is None and slots[i].default is inspect.Parameter.empty:
            slots[i - 1] = slots[i - 1].replace(default=inspect.Parameter.empty)
    attrs = [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY,
                               default=inspect.Parameter.empty if a.default is None else a.default)
             for a in info.attrs.values()]
    return inspect.Signature(slots + attrs)


def _slot_result(variables, duplicable):
    """What the op function returns for one output slot (None: a dispensable one not written)."""
    if variables is None:
        return None
    return variables if duplicable else variables[0]


def _signature_doc(info) -> str:
    ins = ", ".join(s.name + ("?" if s.dispensable else "") + ("*" if s.duplicable else "")
                    for s in info.inputs)
    attrs = ", ".join(f"{a.name}={a.default!r}" for a in info.attrs.values())
    outs = ", ".join(info.visible_outputs)
    return f"{info.type}({ins}; {attrs}) -> {outs}\n\n{info.doc}"


def __getattr__(name: str):
    """``tape.ops.<type>`` of an op registered after this package was imported (a user's own),
    made on first use."""
    info = REGISTRY.get(name)
    if info is None:
        raise AttributeError(f"module 'tape.ops' has no attribute '{name}' (no op of that type "
                             f"is registered)")
    op = globals()[name] = _make_op_function(info)
    return op


def __dir__() -> list:
    return sorted(set(globals()) | set(REGISTRY))


# The families' ops, at once: an op may share its family's name (``dropout``), and its
# function, not the module, is ``tape.ops.dropout``.
for _info in list(REGISTRY.values()):
    globals()[_info.type] = _make_op_function(_info)
del _info
