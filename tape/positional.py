"""Positional runners: the eager runner of an op for its commonest call, written out per op.

Most eager ops are called with one Variable per required input slot, no optional input, no
given output, on the thread's eager tape: ``tape.ops.sigmoid(x)``, ``x * 2.0``. The general
runner (``tape.runner``) takes ``{slot: [Variable]}`` and returns ``{slot: [Variable]}``; for
this call both dicts, their lists, the per-slot count checks, the optional slots' lookups and
the unpacking of the result are work the call's shape already decides. A positional runner
``run(tape, attrs, sig, v0, v1, ...)`` takes the required inputs as arguments and returns what
``tape.ops.<type>`` returns (the visible outputs: one Variable, or a tuple of them).

It serves only the plain case, and hands every other one to the general runner before any
work is done: an input that is not a Variable or holds no value yet (lazy), inputs on two
places, a stale input, a spent tape, a signature with no plan yet, outputs the plan cannot
describe, and any check that is on. Errors, checks and results are therefore the general
runner's, by construction; both key plans alike, so they share them.

An op gets one when its required input slots come first and each takes one Variable
(``positional_slots``); its signature key is the general runner's with the optional slots
absent.
"""
from __future__ import annotations

from .place import CPU
from .runner import GRAD_FLOWS, SIGNATURE_LINES, infer_new, pending_lines, variable_lines
from .variable import stop_gradient_flips


def positional_slots(info) -> tuple | None:
    """The input slots a positional runner of ``info`` takes (its required ones), or None when
    it has none: a required slot that takes several Variables, or one after an optional one."""
    required = [s.name for s in info.inputs if not s.dispensable]
    if any(s.duplicable for s in info.inputs if not s.dispensable) or \
            [s.name for s in info.inputs[:len(required)]] != required:
        return None
    return tuple(required)


def make_positional(info, env: dict, lazy: bool = False):
    """The positional runner of ``info`` (``positional_slots`` must allow one); ``env`` holds
    what it takes from tape.py: ``local``, ``no_grad_blocks``, ``EagerHandle``,
    ``eager_runner`` and ``lazy_tail`` (``tape.lazy_runner.positional_tail``).

    A ``lazy`` one serves a lazy tape: an input may also be pending on a lazy op that has not
    run (its ref is what the op reads), and in place of the kernel call it makes the op's
    LazyOp and leaves the outputs pending on it, recorded as an eager op is (``EagerHandle``)
    plus the lazy tape's record (``tape.lazy_runner``)."""
    required = positional_slots(info)
    n = len(required)
    args = "".join(f", v{i}" for i in range(n))
    general = f"return general(tape, attrs, sig{args})"
    lines = [f"def run(tape, attrs, sig{args}):"]
    # the plain case, checked before any work: else the general runner does everything
    plain = ["tape._spent"]
    for i in range(n):
        plain.append(f"type(v{i}) is not Variable")
    lines += [f"    if {' or '.join(plain)}:",
              f"        {general}"]
    for i in range(n):
        lines += [f"    d{i} = v{i}.desc", f"    a{i} = v{i}._value"]
    lines += ["    place = v0.place" if n else "    place = default_place[0]",
              "    serial = tape.serial",
              *SIGNATURE_LINES,
              *_key_lines(info, n, "    "),
              "    try:",
              "        plan = info.plans.get(key)",
              "    except TypeError:",
              "        plan = None"]
    # (each condition binds t{i}, the input's tape, when none before it held)
    served = ["flags.checking"]
    for i in range(n):
        if not lazy:
            served.append(f"a{i} is None")
        if i:
            served.append(f"v{i}.place is not place")
        served.append(_stale(i))
    lines += [f"    if {' or '.join(served)}:",
              f"        {general}"]
    for i in range(n if lazy else 0):
        lines += _pending_lines(i, general)
    lines += [
              "    if plan is None:",
              "        plan = infer_new(info, {"
              + ", ".join(f"{name!r}: [v{i}]" for i, name in enumerate(required))
              + "}, attrs, place, key)",
              # (a plan that cannot describe its outputs: the general runner makes them)
              "    made = plan.made_whole",
              "    if made is None:",
              f"        {general}"]
    entries = [_entry(info, i, name) for i, name in enumerate(required)]
    # (a lazy op's args: a copy of the absent optional slots' Nones, the required slots set,
    # costs a third less than a dict of three or more built)
    absent = lazy and len(info.inputs) > max(n, 2)
    lines += _recording_lines(info, required, entries, lazy, env,
                              template=("absent", n) if absent else None)
    return _compiled(info, lines, env, lazy,
                     {"absent": dict.fromkeys(s.name for s in info.inputs)} if absent else None)


def make_bound(info, env: dict, given: list, held: list):
    """A lazy recorder of ``info`` for arguments like the Variables ``given`` (their shapes,
    dtypes, stop_gradient and place), its last inputs always the Variables ``held``:
    ``record(tape, (v0, ..., v<len(given)-1>))`` records the op on lazy tape ``tape`` as the
    lazy positional runner does (``make_positional``), or returns None where it does not
    serve. A traced function's op (``tape.function``) records a call with it, its captured
    leaves held: what its positional runner checks and keys of every input on every call, the
    recorder checks of the arguments against the signature written into it, and of the held
    Variables once per tape (the plan, found as the positional runner finds it, their
    arrays and a dict of them that each call's LazyOp ``args`` copies are bound for the
    tape), and again only where one of their arrays changed or any Variable's stop_gradient
    was set to another value since (``variable.stop_gradient_flips``).

    None (for the general path to handle, with its errors) for arguments of another number
    or signature, a stale one, one not a Variable or pending on an op that ran; a held Variable
    that holds no value (pending), is on another place or of another tape; a plan not made
    yet; a call in a ``no_grad`` block where a gradient would flow; a tape spent or tracing;
    a check on."""
    required = positional_slots(info)
    n, arguments = len(required), len(given)
    names = "".join(f"v{i}, " for i in range(arguments))
    kept = range(arguments, n)
    wants = [not v.desc.stop_gradient for v in (*given, *held)]
    other = [f"type(v{i}) is not Variable" for i in range(arguments)]
    unlike = [f"d{i}.shape != {v.desc.shape!r} or d{i}.dtype != {v.desc.dtype} or "
              f"d{i}.stop_gradient is not {v.desc.stop_gradient} or v{i}.place is not place"
              for i, v in enumerate(given)]
    # (a held Variable's stop_gradient: checked where the recorder binds, which it does again
    # once any Variable's flag was set to another value: ``stop_gradient_flips``)
    refused = [f"a{i} is None or {'' if wants[i] else 'not '}v{i}.desc.stop_gradient or "
               f"v{i}.place is not place or v{i}._tape not in (0, serial)" for i in kept]
    rebound = ["serial != bound_serial or flips[0] != bound_flips",
               *(f"v{i}._value is not b{i}" for i in kept)]
    entries = [_entry(info, i, name, False, wants[i] if i < arguments else None)
               for i, name in enumerate(required)]
    # (an argument that wants no gradient is never stale, and its entry is then its VarDesc
    # where the op does not keep it; ``t<i>`` bound only where its entry reads it)
    stale = [f"(t{i} := v{i}._tape) != serial and t{i}" if f"t{i}" in entries[i] else
             f"v{i}._tape != serial and v{i}._tape" for i in range(arguments) if wants[i]]
    # (the plan of the signature wants a gradient where an input does and the op has a grad,
    # as ``dispatch.infer`` decides: a call in a no_grad block is then refused, and the op
    # recorded, unasked)
    flows = info.grad is not None and any(wants)
    lines = ["def run(tape, args):",
             "    try:",
             f"        {names}= args",
             "    except ValueError:      # (another number of arguments)",
             "        return None",
             f"    if {' or '.join(['tape._spent or tape.tracing or flags.checking', *other])}"
             + (" or no_grad_blocks[0] and local.no_grad_depth:" if flows else ":"),
             "        return None",
             *(f"    d{i} = v{i}.desc" for i in range(arguments)),
             f"    if {' or '.join(unlike)}:",
             "        return None",
             "    serial = tape.serial",
             "    bound_serial, bound_flips, plan, made, template"
             f"{''.join(f', b{i}' for i in kept)} = bound",
             f"    if {' or '.join(rebound)}:",
             *(f"        a{i} = v{i}._value" for i in kept),
             *(f"        d{i} = v{i}.desc" for i in kept),
             "        sig = ()",
             *_key_lines(info, n, "        "),
             "        plan = info.plans.get(key)",
             f"        if {' or '.join(['plan is None or plan.made_whole is None', *refused])}:",
             "            return None",
             "        template = {" + ", ".join(f"{s.name!r}: {f'a{i}' if i in kept else None}"
                                       for i, s in enumerate(info.inputs)) + "}",
             "        made = plan.made_whole",
             f"        bound[:] = (serial, flips[0], plan, made, template"
             f"{''.join(f', a{i}' for i in kept)})",
             *(f"    a{i} = v{i}._value" for i in range(arguments)),
             *([f"    if {' or '.join(stale)}:", "        return None"] if stale else [])]
    for i in range(arguments):
        lines += _pending_lines(i, "return None")
    # (a held input's entry: its VarDesc or tape only where the op does not keep it)
    lines += [line for i in kept if entries[i] != f"v{i}"
              for line in (f"    d{i} = v{i}.desc", f"    t{i} = v{i}._tape")]
    lines += [*_recording_lines(info, required, entries, True, env, may_trace=False,
                                template=("template", arguments), flows=flows)]
    namespace = {f"v{i}": v for i, v in zip(kept, held)}
    namespace.update(bound=[None] * (5 + len(kept)), place=given[0].place,
                     flips=stop_gradient_flips)
    return _compiled(info, lines, env, True, namespace, "lazy recorder")


def _key_lines(info, n: int, indent: str) -> list:
    """Lines that bind ``key``, the signature a runner keys ``info``'s plans by, of ``sig``
    (the attributes' signature), the ``n`` required inputs' VarDescs ``d<i>`` and ``place``."""
    key = [f"d{i}.shape, d{i}.dtype, d{i}.stop_gradient" if i < n else "None"
           for i in range(len(info.inputs))]
    return [indent + line for line in (
        f"key = (sig, {', '.join(key)})" if key else "key = (sig,)",
        "if place is not CPU:",
        "    key = (*key, place)")]


def _stale(i: int) -> str:
    """Whether input ``v<i>`` is stale (an op output of another tape that wants a gradient);
    binds ``t<i>``, its tape."""
    return f"(t{i} := v{i}._tape) and t{i} != serial and not d{i}.stop_gradient"


def _pending_lines(i: int, refused: str) -> list:
    """Lazy: an input without a value reads the ref of the op it is pending on, unless that op
    ran (the general runner reads its value) or there is none (its error): ``refused``."""
    return pending_lines(f"a{i}", f"v{i}", refused, "    ")


def _entry(info, i: int, name: str, may_trace: bool = True, wants: bool | None = None) -> str:
    """The handle entry of input ``v<i>`` of slot ``name``: the Variable where the op keeps
    it (or the tape is tracing, or it is a leaf that wants a gradient), else its VarDesc.
    ``may_trace``: whether the tape may be tracing; ``wants``: whether the input wants a
    gradient, where that is known (None: read from ``d<i>``)."""
    if name in info.keeps:
        return f"v{i}"
    traced = "tracing or " if may_trace else ""
    if wants is None:
        return f"v{i} if {traced}not (d{i}.stop_gradient or t{i}) else d{i}"
    return f"v{i} if {traced}not t{i} else d{i}" if wants else \
        f"v{i} if tracing else d{i}" if may_trace else f"d{i}"


def _recording_lines(info, required: tuple, entries: list, lazy: bool, env: dict,
                     may_trace: bool = True, template: tuple | None = None,
                     flows: bool = False) -> list:
    """Lines from the kernel call (a ``lazy`` op: its LazyOp) to the return, once ``plan``,
    ``made``, ``place``, ``serial`` and each input's ``v<i>``, ``a<i>`` (and, for an entry
    that reads them, ``d<i>`` and ``t<i>``) are bound. Without ``may_trace`` (a tape known
    not to be tracing), what only a tracing tape does is left out: the op is recorded
    where its gradient flows; with ``flows`` too (the caller made sure a gradient flows),
    the op is recorded, unasked. ``template``: ``(name, k)`` of a dict of every input
    slot's array, right but for the first ``k`` slots', which a lazy op's ``args``
    copies."""
    n = len(required)
    arrays = [f"a{i}" for i in range(n)] + ["None"] * (len(info.inputs) - n)
    single = len(info.outputs) == 1
    outputs = "".join(f"o{j}, " if not (s.duplicable or s.dispensable) else f"*o{j}, "
                      for j, s in enumerate(info.outputs))
    if lazy:
        head, tail = env["lazy_tail"](info, *(
            (arrays,) if template is None else (arrays[:template[1]], template[0])))
    else:
        head = [f"    result = plan.direct(plan.attrs, None{''.join(', ' + a for a in arrays)})"]
        tail = []
    unrecorded = [] if flows else [
        GRAD_FLOWS,
        *(["    tracing = tape.tracing", "    if not (grad_flows or tracing):"] if may_trace
          else ["    if not grad_flows:"]),
        *(["        op.record = None"] if lazy else []),
        *_output_lines(info, single, False, lazy),
        *_returned(info)]
    return [
        *head,
        *unrecorded,
        *(line[4:] for line in _output_lines(info, single, True, lazy, may_trace)),
        "    h = EagerHandle()",
        *_entries_lines(info, required, entries, outputs, may_trace),
        "    tape._ops.append(h)",
        *tail,
        *(line[4:] for line in _returned(info))]


def _output_lines(info, single: bool, recorded: bool, lazy: bool, may_trace: bool = True) -> list:
    """Lines (indented for the unrecorded branch) that make each output slot's new Variables
    from ``made`` into ``r{j}`` (None for a slot the op does not write; ``v`` itself for an
    op's one output) and, when ``recorded``, its handle entries into ``o{j}`` (``may_trace``:
    as ``_recording_lines``). A ``lazy`` op's outputs hold no value: each is pending on
    ``op`` (``v._lazy``, ``tape.pending``)."""
    lines = []
    flows = recorded and not may_trace     # (recorded, untraced: its gradient flows)
    for j, slot in enumerate(info.outputs):
        value = "None" if lazy else "result" if single else f"result[{j}]"
        kept = slot.name in info.keeps
        if slot.duplicable:
            loop = (f"for k, m in enumerate(made[{j}]):" if lazy else
                    f"for m, value in zip(made[{j}], {value}):")
            descs = recorded and not kept
            body = [f"r{j} = vs = []",
                    *([f"o{j} = []"] if descs else []),
                    loop,
                    *variable_lines("    ", "None" if lazy else "value", recorded,
                                    flows=recorded),
                    *([f"    v._lazy = (op, {j}, k)"] if lazy else []),
                    "    vs.append(v)",
                    *([f"    o{j}.append(d)"] if descs else [])]
            if recorded and may_trace:  # (decided once for the slot, not per output)
                body += ["if not grad_flows:     # (recorded for tracing only)",
                         "    for v in vs:",
                         "        v.desc.stop_gradient = True",
                         *(["if tracing:", f"    o{j} = vs"] if descs else [])]
            if recorded and not descs:
                body.append(f"o{j} = vs")
        else:
            body = variable_lines("", value, recorded, made=f"made[{j}]", flows=flows)
            if lazy:
                body.append(f"v._lazy = (op, {j}, -1)")
            if not _only_output(info):
                body.append(f"r{j} = v")
            if recorded and not _only_output(info):     # (the one output: see _entries_lines)
                entry = ("v", "d") if not slot.dispensable else ("(v,)", "(d,)")
                body.append(f"o{j} = {entry[0]}" if kept else
                            f"o{j} = {entry[0]} if tracing else {entry[1]}" if may_trace else
                            f"o{j} = {entry[1]}")
        if slot.duplicable or slot.dispensable:
            absent = [f"r{j} = None"] + ([f"o{j} = ()"] if recorded else [])
            body = [f"if made[{j}] is not None:", *("    " + b for b in body), "else:",
                    *("    " + a for a in absent)]
        lines += ["        " + b for b in body]
    return lines


def _entries_lines(info, required: tuple, entries: list, outputs: str,
                   may_trace: bool = True) -> list:
    """Lines that fill handle ``h``: its plan and entries (``entries``: each input's entry;
    ``outputs``: the outputs' ``o{j}``). An op's one output is ``v`` itself: traced, every
    entry is its Variable, else the untraced entries, each decided without ``tracing``
    (``may_trace``: as ``_recording_lines``)."""
    if not _only_output(info):
        return ["    h.plan = plan",
                f"    h.entries = ({''.join(e + ', ' for e in entries)}{outputs})"]
    untraced = [e.replace("tracing or ", "") for e in entries]
    out = "v" if info.outputs[0].name in info.keeps else "d"
    untraced_lines = [f"    h.entries = ({''.join(e + ', ' for e in untraced)}{out},)"]
    if not may_trace:
        return ["    h.plan = plan", *untraced_lines]
    return ["    h.plan = plan",
            "    if tracing:",
            f"        h.entries = ({''.join(f'v{i}, ' for i in range(len(required)))}v,)",
            "    else:",
            "    " + untraced_lines[0]]


def _only_output(info) -> bool:
    """Whether the op writes one output, always (its Variable is ``v``, returned as it is)."""
    return len(info.outputs) == 1 and not (info.outputs[0].duplicable or
                                           info.outputs[0].dispensable)


def _returned(info) -> list:
    """The line returning what ``tape.ops.<type>`` returns (indented for the unrecorded
    branch): the visible outputs, one Variable or a tuple."""
    if _only_output(info):
        return ["        return v"]
    visible = [f"r{j}" for j, s in enumerate(info.outputs) if not s.intermediate]
    if len(visible) == 1:
        return [f"        return {visible[0]}"]
    return [f"        return ({''.join(r + ', ' for r in visible)})"]


def _compiled(info, lines: list, env: dict, lazy: bool, bound: dict | None = None,
              kind: str | None = None):
    """The function ``run`` that ``lines`` define, with the names runners use and ``bound``'s,
    named ``<kind of type>`` (default: a positional runner)."""
    from . import flags as _flags
    from . import place as _places
    from .desc import VarDesc
    from .variable import Variable

    names = [s.name for s in info.inputs if not s.dispensable]
    eager_runner = env["eager_runner"]

    def general(tape, attrs, sig, *values):
        """The call, given to the general runner: what it returns, as ``tape.ops`` does."""
        inputs = {name: [v] for name, v in zip(names, values) if v is not None}
        if lazy:
            return visible_outputs(info, tape.run(info, inputs, attrs, None, sig))
        out = (info.runner or eager_runner(info))(tape, inputs, attrs, None, sig)
        return visible_outputs(info, out)

    namespace = dict(info=info, CPU=CPU, default_place=_places._default, flags=_flags,
                     Variable=Variable, VarDesc=VarDesc,
                     new=object.__new__, local=env["local"], EagerHandle=env["EagerHandle"],
                     no_grad_blocks=env["no_grad_blocks"],
                     general=general, infer_new=infer_new)
    if lazy:
        namespace.update(env["lazy_namespace"])
    namespace.update(bound or {})
    name = f"<{kind or ('lazy ' if lazy else '') + 'positional runner'} of {info.type}>"
    exec(compile("\n".join(lines), name, "exec"), namespace)
    return namespace["run"]


def visible_outputs(info, out: dict):
    """What ``tape.ops.<type>`` returns of a runner's ``{slot: [Variable]}``: each visible
    output slot's Variable (its list for a slot of several; None for one not written), one or
    a tuple."""
    results = []
    for s in info.outputs:
        if s.intermediate:
            continue
        vs = out.get(s.name)
        results.append(vs if s.duplicable else vs[0] if vs else None)
    return results[0] if len(results) == 1 else tuple(results)
