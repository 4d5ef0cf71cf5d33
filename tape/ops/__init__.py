"""Operator definitions, and ``tape.ops.<type>(...)`` made from the registry.

Each generated function takes the op's inputs positionally in slot order (a list for a
duplicable slot, None to skip a dispensable one; slots may also be given by name) and its
attributes as keywords, runs the op on the global tape and returns its non-intermediate outputs:
one Variable, or a tuple in proto order.
"""
import builtins
import inspect

from .. import tape as tape_module
from ..positional import positional_slots
from ..registry import REGISTRY
from ..tape import LazyTape, Tape, _local, get_global_tape

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
    """``tape.ops.<type>``, written out for the op's slots as its runner is (``tape.runner``):
    one straight block per input slot and per visible output, no loop over slots per call.
    The commonest call (the required inputs only, on the thread's eager tape) goes to the
    op's positional runner (``tape.positional``), which returns the visible outputs itself."""
    slots = [(s.name, s.duplicable) for s in info.inputs]
    visible = [(s.name, s.duplicable) for s in info.outputs if not s.intermediate]
    params = "".join(f"a{i}=None, " for i in builtins.range(len(slots)))
    lines = [f"def op({params}{'/, ' if slots else ''}*more, **attrs):",
             "    if more:",
             f"        raise too_many(info, {len(slots)} + len(more))",
             "    t = local.tape"]
    required = positional_slots(info)
    if required is not None:
        # (only while Tape.run is Tape's own: a subclass or a spy on Tape.run sees every op)
        # (no slot given by name: a test per slot costs less than a set's isdisjoint call)
        unnamed = (" and ".join(f"{name!r} not in attrs" for name, _ in slots)
                   if len(slots) <= 3 else "by_name.isdisjoint(attrs)")
        plain = [*(f"a{i} is None" for i in builtins.range(len(required), len(slots))),
                 *([f"(not attrs or {unnamed})"] if slots else [])]
        given = "".join(f", a{i}" for i in builtins.range(len(required)))
        lines += [f"    if {' and '.join(plain or ['True'])}:",
                  "        if type(t) is Tape and Tape.run is tape_run:",
                  f"            return positional(t, attrs, None{given})",
                  "        if type(t) is LazyTape and LazyTape.run is lazy_tape_run:",
                  f"            return lazy_positional(t, attrs, None{given})"]
    lines.append("    inputs = {}")
    for i, (name, many) in enumerate(slots):
        lines += [f"    if a{i} is not None:",
                  f"        inputs[{name!r}] = {f'list(a{i})' if many else f'[a{i}]'}"]
    if slots:
        lines += ["    if attrs and not by_name.isdisjoint(attrs):   # slots given by name",
                  "        named_slots(attrs, inputs)"]
    lines += ["    if t is None:",
              "        t = get_global_tape()",
              "    out = t.run(info, inputs, attrs)"]
    results = []
    for i, (name, many) in enumerate(visible):
        if many:
            results.append(f"out.get({name!r})")
        else:
            lines += [f"    w{i} = out.get({name!r})"]
            results.append(f"w{i}[0] if w{i} else None" if len(visible) == 1
                           else f"None if w{i} is None else w{i}[0]")
    lines.append(f"    return {results[0]}" if len(results) == 1
                 else f"    return ({''.join(r + ', ' for r in results)})")   # () for none
    duplicable = dict(slots)

    def named_slots(attrs, inputs):
        for name in [k for k in attrs if k in duplicable]:
            arg = attrs.pop(name)
            inputs[name] = list(arg) if duplicable[name] else [arg]

    namespace = {"info": info, "local": _local, "get_global_tape": get_global_tape,
                 "too_many": _too_many, "by_name": duplicable.keys(),
                 "named_slots": named_slots, "Tape": Tape, "tape_run": Tape.run,
                 "LazyTape": LazyTape, "lazy_tape_run": LazyTape.run}

    def first_positional(*args):
        """The op's positional runner, made on its first call (then called directly)."""
        run = namespace["positional"] = tape_module.positional_runner(info)
        return run(*args)

    def first_lazy_positional(*args):
        """Its lazy positional runner, likewise."""
        run = namespace["lazy_positional"] = tape_module.lazy_positional_runner(info)
        return run(*args)

    namespace["positional"] = first_positional
    namespace["lazy_positional"] = first_lazy_positional
    exec(compile("\n".join(lines), f"<tape.ops.{info.type}>", "exec"), namespace)
    op = namespace["op"]
    op.__name__ = op.__qualname__ = info.type
    op.__module__ = __name__
    op.__doc__ = _signature_doc(info)
    op.__signature__ = _signature(info)
    return op


def _too_many(info, n: int) -> TypeError:
    return TypeError(f"{info.type} takes at most {len(info.inputs)} inputs "
                     f"({', '.join(info.input_names)}), received {n}")


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
