"""Eager runners: the body of ``Tape.run``, written out once per op type from its slots.

Every eager op of every iteration runs one. A generic loop over an op's input slots spends most
of an op's Python time deciding, per call, what the op's slots already fix (which slots are
optional or take several Variables, where each goes in the signature); the runner of an op has
those decisions made: one straight block per slot, the signature built as one tuple, the
recorded entries only when the op is recorded. What it does, in order: check the inputs, find
the op's CallPlan by signature (``dispatch.infer`` for a new one), refuse a stale input, call
the kernel (``CallPlan.direct``, or ``dispatch.invoke`` when a check is on), make the outputs
(written out from ``CallPlan.made``) or fill the given ones, record the handle.
"""
from __future__ import annotations

from . import flags as _flags
from . import place as _places
from .attr_signature import is_exact, listed_signature, signature
from .desc import VarDesc
from .dispatch import infer, invoke
from .place import CPU
from .runner_checks import (
    check_stale,
    common_place,
    count_error,
    gather_many,
    not_variable,
    spent_error,
    stale_error,
)
from .variable import Variable, new_variable

# Whether the op's outputs want gradients: the plan says whether any input does, and the
# thread's depth in ``no_grad`` blocks is read only while some thread has one open.
GRAD_FLOWS = ("    grad_flows = plan.requires_grad and not (no_grad_blocks[0] and "
              "local.no_grad_depth)")

# ``sig``, where the caller gave None: ``attr_signature.signature`` written out for attributes
# with no zero or NaN, ``(*attrs.items(), *map(type, attrs.values()))``; one or two attributes
# (most calls that pass any) unpacked from ``items()``, which builds the same tuple for less
# than half the instructions
SIGNATURE_LINES = (
    "    if sig is None:",
    "        if not attrs:",
    "            sig = ()",
    "        elif len(attrs) == 1:",
    "            (i0,) = attrs.items()",
    "            sig = (i0, type(i0[1]))",
    "        elif len(attrs) == 2:",
    "            i0, i1 = attrs.items()",
    "            sig = (i0, i1, type(i0[1]), type(i1[1]))",
    "        else:",
    "            sig = (*attrs.items(), *map(type, attrs.values()))")


def make_runner(info, env: dict, lazy: bool = False):
    """The runner of ``info``: ``run(tape, inputs, attrs, outputs=None, sig=None) -> {slot:
    [Variable]}``; ``sig`` is ``signature(attrs)`` when the caller has it already.

    ``env`` holds what it takes from tape.py: ``local`` (the thread's tape and no_grad depth),
    ``no_grad_blocks`` (how many no_grad blocks are open in all threads),
    ``restart`` (reset_global_tape) and ``OpHandle``. A ``lazy`` runner does everything but the
    kernel call: its outputs are pending on the op (``tape.lazy``), computed when asked for; an
    op whose output shapes only its values tell (``CallPlan.shaped_by_values``) runs at once.
    An eager runner given a pending input computes it first (lazy and eager Variables mix).
    """
    lines = ["def run(tape, inputs, attrs, outputs=None, sig=None):",
             "    if tape._spent and tape is local.tape:",
             "        return restart().run(info, inputs, attrs, outputs)",
             "    place = None"]
    key, arrays, positional, stale = [], [], [], []
    flat, parts = [], []    # (eager) the inputs' entries, bound one per slot, and their parts
    for i, (name, duplicable, dispensable) in enumerate(info.slot_specs):
        kept = name in info.keeps
        lines += (env["lazy_gather_many"](i, name, dispensable, kept) if lazy and duplicable else
                  _gather(i, name, duplicable, dispensable, first=i == 0))
        if duplicable or dispensable:
            key.append(f"k{i}")
        else:
            key.append(f"d{i}.shape, d{i}.dtype, d{i}.stop_gradient")
        arrays.append(f"{name!r}: a{i}")
        positional.append(f", a{i}")
        if duplicable:
            stale.append(f"    if {f'stale{i}' if lazy else f'vs{i}'}:\n"
                         f"        check_stale(tape, info, {name!r}, vs{i})")
            if kept:
                flat.append(f"    e{i} = vs{i} if vs{i} else ()")
            elif not lazy:  # (a lazy runner's gather binds them)
                flat.append(f"    e{i} = [v if tracing or not (v.desc.stop_gradient or v._tape) "
                            f"else v.desc for v in vs{i}] if vs{i} else ()")
            parts.append(f"*e{i}")
        else:
            guard = f"v{i} is not None and " if dispensable else ""
            stale.append(f"    if {guard}v{i}._tape and v{i}._tape != tape.serial and "
                         f"not d{i}.stop_gradient:\n"
                         f"        raise stale_error(info, {name!r}, v{i})")
            one = (f"v{i}" if kept else
                   f"v{i} if tracing or not (d{i}.stop_gradient or v{i}._tape) else d{i}")
            flat.append(f"    e{i} = ({one},) if v{i} is not None else ()" if dispensable
                        else f"    e{i} = {one}")
            parts.append(f"*e{i}" if dispensable else f"e{i}")
    lines += [
        *SIGNATURE_LINES,
        f"    key = (sig, {', '.join(key)})" if key else "    key = (sig,)",
        "    if place is None:",
        "        place = default_place[0]",
        "    if place is not CPU:    # (most ops: no Place to hash)",
        "        key = (*key, place)",
        "    try:",
        "        plan = info.plans.get(key)",
        "    except TypeError:   # a list among the attributes: the checked ones are hashable",
        "        plan = None",
        *stale,
        "    if plan is None:",
        "        plan = infer_new(info, inputs, attrs, place, key)"]
    if lazy:    # no kernel call: the op is recorded to run when asked for (tape.lazy_runner)
        lines += env["lazy_lines"](info, flat, parts)
        return _compiled(info, lines, env, lazy)
    single = len(info.outputs) == 1
    lines += [
        "    if flags.checking:",
        f"        arrays = {{{', '.join(arrays)}}}",
        "        if flags.flags['FLAGS_check_nan_inf']:",
        "            outputs = named_outputs(plan, outputs)     # named now, for the check's "
        "message",
        "        result = invoke(plan, arrays, None, outputs)",
        *(["        result = result[0]"] if single else []),
        "    else:",
        f"        result = plan.direct(plan.attrs, None{''.join(positional)})"]
    # make_outputs takes one entry per output slot, as invoke returns them
    result = "(result,)" if single else "result"
    lines += [
        GRAD_FLOWS,
        "    tracing = tape.tracing",
        "    record = grad_flows or tracing",
        "    if record and tape._spent:",
        "        raise spent_error(info)",
        "    made = plan.made if outputs is None else None",
        "    if not record:",
        *("    " + line for line in made_lines(info, single, False)),
        f"        return make_outputs(plan, {result}, outputs, False, 0, place, None)",
        *flat,      # one tuple of entries (EagerHandle), not a dict and a list per slot
        *made_lines(info, single, True, parts),
        "    keeps = info.slot_names if tracing else info.keeps",
        "    outs = {}",
        f"    produced = make_outputs(plan, {result}, outputs, grad_flows, tape.serial, place, "
        "(keeps, outs))",
        "    h = EagerHandle()",
        f"    h.plan, h.entries = plan, ({''.join(p + ', ' for p in parts)}"
        "*[e for es in outs.values() for e in es],)",
        "    tape._ops.append(h)",
        "    return produced",
    ]
    return _compiled(info, lines, env, lazy)


def _compiled(info, lines: list, env: dict, lazy: bool):
    """The function ``run`` that ``lines`` define, compiled with the names runners use."""
    namespace = dict(env, info=info, CPU=CPU, default_place=_places._default, flags=_flags,
                     invoke=invoke, infer_new=infer_new, Variable=Variable,
                     check_stale=check_stale, stale_error=stale_error,
                     spent_error=spent_error, make_outputs=make_outputs,
                     named_outputs=named_outputs, count_error=count_error,
                     not_variable=not_variable, VarDesc=VarDesc, new=object.__new__,
                     EagerHandle=env["EagerHandle"],
                     common_place=common_place, gather_many=gather_many,
                     unset=env["pending_ref"] if lazy else env["pending_value"])
    if lazy:
        namespace.update(env["lazy_namespace"])
    name = f"<{'lazy ' if lazy else ''}runner of {info.type}>"
    exec(compile("\n".join(lines), name, "exec"), namespace)
    return namespace["run"]


def made_lines(info, single: bool, recorded: bool, parts: list | None = None,
                lazy: bool = False, tail: tuple = ()) -> list:
    """Lines that make an eager op's new outputs from ``made`` (``CallPlan.made``) and return
    them, when it is not None; what ``make_outputs`` does, written out for the op's slots (a
    call and a loop less per op, and no VarDesc or Variable constructor call). A ``recorded``
    op's handle is an EagerHandle of the input entries' ``parts`` and the outputs' (an op
    whose shape rule left a required output undescribed takes the generic path). A ``lazy``
    op's outputs hold no value: each is pending on ``op`` (``v._lazy``, ``tape.pending``).
    ``tail``: lines (indented 4) run last, before the return."""
    required = [n for n, slot in enumerate(info.outputs)
                if recorded and not (slot.duplicable or slot.dispensable)]
    lines = ["    if made is not None"
             + "".join(f" and made[{n}] is not None" for n in required) + ":",
             "        produced = {}"]
    if recorded:
        lines.append("        serial = tape.serial")
    outs = []
    for n, slot in enumerate(info.outputs):
        value, name = "result" if single else f"result[{n}]", repr(slot.name)
        if lazy:
            value = "None"
        lines += [f"        m = made[{n}]", "        if m is not None:"]
        if slot.duplicable:
            lines += ["            vs = []",
                      "            for k, m in enumerate(m):" if lazy else
                      f"            for m, value in zip(m, {value}):",
                      *variable_lines("                ", "None" if lazy else "value", recorded),
                      *([f"                v._lazy = (op, {n}, k)"] if lazy else []),
                      "                vs.append(v)",
                      f"            produced[{name}] = vs"]
            if recorded:
                lines.append(f"            o{n} = vs" if slot.name in info.keeps else
                             f"            o{n} = vs if tracing else [v.desc for v in vs]")
        else:
            lines += [*variable_lines("            ", value, recorded),
                      *([f"            v._lazy = (op, {n}, -1)"] if lazy else []),
                      f"            produced[{name}] = [v]"]
            if recorded:
                kept, desc = ("v", "d") if n in required else ("(v,)", "(d,)")
                lines.append(f"            o{n} = {kept}" if slot.name in info.keeps else
                             f"            o{n} = {kept} if tracing else {desc}")
        if recorded:
            if n not in required:
                lines += ["        else:", f"            o{n} = ()"]
            outs.append(f"o{n}" if n in required else f"*o{n}")
    if recorded:
        lines += ["        h = EagerHandle()",
                  f"        h.plan, h.entries = plan, ({''.join(p + ', ' for p in parts + outs)})",
                  "        tape._ops.append(h)"]
    return lines + ["    " + line for line in tail] + ["        return produced"]


def variable_lines(indent: str, value: str, recorded: bool, made: str = "m",
                   flows: bool = False) -> list:
    """Lines that make ``v``, a new output Variable holding ``value``, and ``d``, its VarDesc,
    from ``made`` (default ``m``) = (shape, dtype, stop_gradient when a gradient flows);
    ``flows``: recorded where a gradient is known to flow (made's stop_gradient as it is)."""
    described = ["d.shape, d.dtype, d.stop_gradient = " + made] + (
        [] if flows else ["if not grad_flows:", "    d.stop_gradient = True"]) if recorded else \
        ["d.shape, d.dtype, stop_gradient = " + made, "d.stop_gradient = True"]
    return [indent + line for line in (
        "d = new(VarDesc)",
        *described,
        "v = new(Variable)",
        "v.desc = d",
        f"v._value = {value}",
        "v.grad = None",
        f"v._tape = {'serial' if recorded else '0'}",
        "v.place = place")]


def _gather(i: int, name: str, duplicable: bool, dispensable: bool, first: bool) -> list:
    """Lines that check slot ``name``'s inputs and bind, for slot ``i``: ``v{i}``/``d{i}``/
    ``a{i}`` (its Variable, VarDesc and array) or, for a duplicable slot, ``vs{i}``/``a{i}``
    (its Variables and arrays), and ``k{i}``, its part of the signature. The ``first`` slot's
    Variable, if the slot takes exactly one, gives the place without a call."""
    n = repr(name)
    if duplicable:
        absent = ("        vs{i} = k{i} = a{i} = None" if dispensable
                  else "        raise count_error(info, {n}, vs{i})")
        return [f"    vs{i} = inputs.get({n})",
                f"    if vs{i}:",
                f"        k{i}, a{i}, place = gather_many(info, inputs, {n}, vs{i}, place, unset)",
                "    else:",
                absent.format(i=i, n=n)]
    check = [f"    if not isinstance(v{i}, Variable):",
             f"        raise not_variable(info, {n}, v{i})",
             f"    d{i} = v{i}.desc",
             f"    a{i} = v{i}._value",
             f"    if a{i} is None:     # pending on a lazy op, or an error",
             f"        a{i} = unset(info, {n}, v{i})",
             f"    if v{i}.place is not place:",
             f"        place = common_place(info, inputs, place, {n}, v{i})"]
    if first and not dispensable:
        check[-2:] = [f"    place = v{i}.place"]
    if not dispensable:
        return [f"    vs = inputs.get({n})",
                "    if not vs or len(vs) != 1:",
                f"        raise count_error(info, {n}, vs)",
                f"    v{i} = vs[0]", *check]
    return [f"    vs = inputs.get({n})",
            "    if vs:",
            "        if len(vs) != 1:",
            f"            raise count_error(info, {n}, vs)",
            f"        v{i} = vs[0]",
            *("    " + line for line in check),
            f"        k{i} = (d{i}.shape, d{i}.dtype, d{i}.stop_gradient)",
            "    else:",
            f"        v{i} = d{i} = a{i} = k{i} = None"]


def pending_lines(value: str, variable: str, refused: str, indent: str) -> list:
    """Lazy: lines that, when ``value`` (an input's array) is None, make it the ref of the op
    ``variable`` is pending on, unless that op ran (its value is read as an eager op reads it)
    or there is none (its error): ``refused`` then."""
    return [indent + line for line in (
        f"if {value} is None:",
        "    try:",
        f"        {value} = {variable}._lazy",
        "    except AttributeError:     # (a slot eager Variables never set)",
        f"        {value} = None",
        f"    if {value} is None or {value}[0].results is not None:",
        f"        {refused}")]


def infer_new(info, inputs: dict, attrs, place, key: tuple):
    """The CallPlan of a key its runner did not find: the plan of the attributes' exact or
    listed signature when there is one, else a new one (attributes checked, then
    ``dispatch.infer``), remembered under that signature (the checked attributes' when the
    given ones are not hashable even so: a list of lists).

    A plan whose attributes hold a float zero or a NaN is keyed by their exact signature
    (``attr_signature``), never by the plain one a runner writes out: ``-0.0 == 0.0`` would
    find the other zero's plan, and a fresh NaN none. Such a call comes here every time; the
    check of the values costs only these calls, and plan creation. So does a call with a list
    among its attributes, which a runner's plain signature cannot hash: it is found by its
    listed signature (``attr_signature.listed_signature``)."""
    if not is_exact(key[0]):
        exact = signature(attrs)
        key = (exact if is_exact(exact) else listed_signature(attrs), *key[1:])
        try:
            plan = info.plans.get(key)
        except TypeError:   # a list of lists
            plan = None
        if plan is not None:
            return plan
    attrs, attrs_key = info.checked_attrs(attrs)
    try:
        hash(key)
    except TypeError:
        key = (attrs_key, *key[1:])
        plan = info.plans.get(key)
        if plan is not None:
            return plan
    descs = {name: [v.desc for v in vs] for name, vs in inputs.items() if vs}
    return infer(info, attrs, attrs_key, descs, place, key)


def make_outputs(plan, result, outputs, grad_flows: bool, serial: int, place, recording):
    """``{slot: [Variable]}`` of the kernel's ``result``: new Variables, or the given
    ``outputs`` filled in. ``recording`` is ``(keeps, outs)`` when the op is recorded: ``outs``
    then gets each slot's entries (the Variables when ``keeps`` names the slot, else their
    VarDescs)."""
    produced = {}
    slots = plan.value_shaped(result) if plan.shaped_by_values else plan.outputs
    for (slot, duplicable, spec, carries), value in zip(slots, result):
        if spec is None:
            continue
        given = outputs.get(slot) if outputs is not None else None
        values = value if duplicable else (value,)
        flows = grad_flows and carries
        if given:
            # A Variable written by an op that passes it no gradient (a feeder, an optimizer's
            # in-place update, batch norm's running statistics) keeps its own stop_gradient: a
            # parameter stays trainable, a statistic stays constant.
            for v, (shape, out_dtype), val in zip(given, spec, values):
                d = v.desc
                d.shape, d.dtype = shape, out_dtype
                if flows:
                    d.stop_gradient = False
                v._value, v._tape, v.place = val, serial, place
            vs = given
        elif len(spec) == 1:
            shape, out_dtype = spec[0]
            vs = [new_variable(VarDesc.temporary(shape, out_dtype, not flows), values[0], serial,
                               place)]
        else:
            vs = [new_variable(VarDesc.temporary(shape, out_dtype, not flows), val, serial, place)
                  for (shape, out_dtype), val in zip(spec, values)]
        produced[slot] = vs
        if recording is not None:
            keeps, outs = recording
            outs[slot] = vs if slot in keeps else [v.desc for v in vs]
    return produced


def named_outputs(plan, outputs: dict | None) -> dict:
    """``outputs`` completed with new, still empty Variables for the output slots it does not
    name, so that the NaN/Inf check after the kernel can name them; they are then filled in as
    given outputs are, which leaves them as new ones would be."""
    outputs = dict(outputs or {})
    for slot, _, spec, _ in plan.outputs:
        if not outputs.get(slot) and spec:
            outputs[slot] = [new_variable(VarDesc.temporary(shape, dtype, True), None, 0)
                             for shape, dtype in spec]
    return outputs
