"""``tape.function``: a Python function of Variables traced once per signature and recorded
as one op (TensorFlow's ``tf.function``, JAX's ``jit``, Paddle's ``to_static``, in Tape's terms).

Tracing runs the function on placeholder Variables on a private recording tape (a LazyTape:
every op checked and its shape rule asked, no kernel run) and keeps what it recorded as a
``function_program.Graph``; ``function_op`` registers the op that runs it.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable

from .errors import InvalidArgumentError
from .function_op import input_slots, register_function_op
from .function_program import Graph, Step
from .grad_replay import shape_only
from .place import CPU
from .positional import make_bound
from .tape import (
    _RUNNER_ENV,
    LazyTape,
    Tape,
    _local,
    get_global_tape,
    lazy_positional_runner,
    positional_runner,
    using_tape,
)
from .var_desc import VarDesc
from .variable import Variable, forbid_value_reads, new_variable, stop_gradient_flips


def function(fn: Callable, check: Callable | None = None) -> Function:
    """Trace ``fn``, a function of Variables returning a Variable or a tuple/list of them, once
    per signature, and record each call as ONE op.

    A call records one op whose inputs are the arguments plus every Variable ``fn``'s ops read
    that no argument leads to (its *captured* Variables: parameters of the layers it calls, or
    any other Variable, pending or not) and whose outputs are ``fn``'s. Forward values equal
    ``fn``'s own, bit for bit; gradients flow to the arguments and the captured Variables as if
    ``fn``'s ops had been recorded one by one (a captured weight's gradient parts of one call
    are summed first, so over several calls they may round differently). On a lazy tape, calls
    of one trace with the same captured Variables run as one batched call where every traced
    op is row-wise in the arguments. On a tracing tape (``tape.static.trace``, export) ``fn``
    is called inline, so programs hold only Paddle's ops.

    ``fn`` is traced again when the arguments' shapes, dtypes, places or stop_gradient change,
    or when a captured Variable is gone, computed on another tape, or changed stop_gradient.
    As with ``jit``, ``fn`` must not depend on values: reading one while tracing
    (``numpy()``, ``item()``, ``bool()``...) raises, and Python control flow can depend only on
    shapes. Captured Variables are those found when tracing: a Variable that should differ per
    call must be an argument.

    ``check``, if given, is called with the arguments for every call no existing trace
    records (a new signature, or an inlined call on a tracing tape), before anything else:
    a check that depends only on the arguments' shapes, dtypes and stop_gradient (the
    signature) thus runs once per signature and still sees every call that could fail it.

    >>> @tape.function
    ... def cell(x, h):
    ...     return ops.tanh(linear(ops.concat([x, h], axis=1)))   # linear's weights captured
    >>> h = cell(x, h)                                                 # one recorded op
    """
    return Function(fn, check)


class Function:
    """What ``tape.function`` returns: calling it records ``fn`` as one op (see ``function``)."""

    def __init__(self, fn: Callable, check: Callable | None = None):
        self.fn = fn
        self.check = check
        self.name = getattr(fn, "__name__", "function")
        self.traces: dict = {}      # the arguments' signature (_written_call) -> _Trace
        # number of arguments -> the lazy recorder (_Trace.record) that served such a call last
        self.recorders: dict = {}
        self.recorder = None        # the one of those that served the last call (of any number)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Variable):
        # (the written call's first question, asked here of the last call's recorder, which
        # refuses another number of arguments: a recurrent step's call on a lazy tape then
        # costs no frame but the recorder's; the thread's tape read as get_global_tape reads it)
        t = _local.tape
        if type(t) is LazyTape:
            record = self.recorder
            if record is not None:
                made = record(t, args)
                if made is not None:
                    return made
        elif t is None:
            t = get_global_tape()
        return (_calls.get(len(args)) or _written_call(self, len(args)))(self, t, args)

    def written_call(self, n: int):
        """``call(function, t, args)``: what calling a Function on ``n`` arguments (``args``,
        a tuple) runs, on ``t``, the thread's tape (``_written_call``, shared by every
        Function). A caller that calls one on ``n`` arguments again and again (a recurrent
        cell) may call it directly, with the Function and the tape first: a frame less per
        call."""
        return _calls.get(n) or _written_call(self, n)

    def call_traced(self, t, args: tuple, key: tuple | None):
        """The call on ``args`` that a written call (``_written_call``) hands over, on tape
        ``t``: ``check`` first, if any; ``fn`` inline on a tracing tape; an argument that is
        not a Variable refused; else recorded, with ``fn`` traced again under ``key`` (the
        arguments' signature) where its trace is missing or no longer holds, through
        ``t.run`` on a tape with no positional runner."""
        if self.check is not None:
            self.check(*args)
        if t.tracing:
            return self.fn(*args)
        for a in args:
            if not isinstance(a, Variable):
                raise InvalidArgumentError(
                    f"tape.function {self.name}: arguments must be Variables; received "
                    f"{type(a).__name__} (pass a constant by closure)")
        trace = self.traces.get(key)
        captured = None if trace is None else trace.captured_now(t.serial)
        if captured is None:
            trace = self.traces[key] = _trace(self.fn, self.name, args, t)
            captured = trace.captured_now(t.serial)
            self.recorders.clear()      # (one may be the replaced trace's)
            self.recorder = None
        run = trace.runner(type(t))
        if run is not None:
            return run(t, {}, (), *args, *captured)
        made = t.run(trace.info, dict(zip(trace.slots, ([v] for v in (*args, *captured)))),
                     None)
        outs = tuple(made[s.name][0] for s in trace.info.outputs)
        return outs[0] if len(outs) == 1 else outs


# number of arguments -> the call of a Function on that many, written out (_written_call)
_calls: dict = {}


def _written_call(function: Function, n: int):
    """``call(function, t, args)``: a call of a Function on ``n`` arguments (``args``, a
    tuple) on tape ``t`` (the thread's), written out as the positional runners are
    (``tape.positional``), shared by every Function. On a lazy tape, the recorder that served
    the Function's last call on ``n`` arguments is asked first: it checks the arguments'
    signature itself, without a key (a recurrent step calls one trace again and again). Else
    the plain call (Variables, a trace that holds, a tape with a positional runner) is keyed
    and recorded here, on a lazy tape by the trace's recorder where it has one and it serves;
    any other is handed to ``Function.call_traced``. The key of the arguments' signature is
    their shapes, dtypes and stop_gradient, with their places past those when one is not the
    CPU (a Place hashes in Python)."""
    if not n:
        raise InvalidArgumentError(f"tape.function {function.name}: a traced function takes "
                                   f"at least one Variable argument")
    names = [f"a{i}" for i in range(n)]
    given = ", ".join(names)
    # (``type`` first: an isinstance call costs more, and only a subclass needs one)
    not_variables = " or ".join(f"type({a}) is not Variable and not isinstance({a}, Variable)"
                                for a in names)
    lines = ["def call(function, t, args):",
             "    if type(t) is LazyTape:",
             f"        record = function.recorders.get({n})",
             "        if record is not None:",
             "            made = record(t, args)",
             "            if made is not None:",
             "                return made",
             f"    {given}, = args",
             f"    if t.tracing or {not_variables}:",
             "        return function.call_traced(t, args, None)",
             *(f"    d{i} = {a}.desc" for i, a in enumerate(names)),
             "    key = (" + ", ".join(f"d{i}.shape, d{i}.dtype, d{i}.stop_gradient"
                                       for i in range(n)) + ")",
             f"    if {' or '.join(f'{a}.place is not CPU' for a in names)}:",
             f"        key = (*key, {', '.join(f'{a}.place' for a in names)})",
             "    trace = function.traces.get(key)",
             "    if trace is not None:",
             "        record = trace.record",
             "        if record is not None and type(t) is LazyTape:",
             "            made = record(t, args)",
             "            if made is not None:",
             f"                function.recorders[{n}] = function.recorder = record",
             "                return made",
             "        checked = trace.checked",
             "        captured = checked[2] if checked[0] == t.serial and \\",
             "            checked[1] == flips[0] else trace.captured_now(t.serial)",
             "        run = trace.runners.get(type(t))",
             "        if captured is not None and run is not None:",
             f"            return run(t, {{}}, (), {given}, *captured)",
             "    return function.call_traced(t, args, key)"]
    namespace = {"Variable": Variable, "CPU": CPU, "LazyTape": LazyTape,
                 "flips": stop_gradient_flips}
    exec(compile("\n".join(lines), f"<call of a tape.function on {n} arguments>", "exec"),
         namespace)
    call = _calls[n] = namespace["call"]
    return call


class _Trace:
    """One trace of a function: its op (``info``) and input slots (``slots``), its runners
    by tape class (``tape.positional``: inputs as arguments, outputs returned as ``tape.ops``
    returns them; made on first use, ``runner``), and its captured Variables and whether they
    wanted gradients.

    A captured leaf (a parameter, or a constant the function made) is held; a captured op
    output only weakly (a trace must not keep an activation alive): once it is gone, the
    function is traced again. A trace that holds every captured Variable has a ``record``
    taking only the arguments (``positional.make_bound``: written for the signature of those
    it was traced on), which records a call on a lazy tape without keying it, or checking its
    captured Variables each time; else None."""

    __slots__ = ("info", "slots", "runners", "record", "captured", "captured_wants",
                 "checked")

    def __init__(self, info, slots: list, args: tuple, captured: list):
        self.info = info
        self.slots = slots
        self.runners = {}
        self.captured = [weakref.ref(v) if v._tape else _Held(v) for v in captured]
        self.record = None if any(v._tape for v in captured) else \
            make_bound(info, _RUNNER_ENV, args, captured)
        self.captured_wants = [not v.desc.stop_gradient for v in captured]
        # (tape serial, ``stop_gradient_flips``, captured Variables) as last checked, where
        # every one is a leaf (held anyway, and a leaf stays one): checked once per tape, and
        # again where any Variable's stop_gradient was set to another value since
        self.checked = (None, None, None)

    def runner(self, tape_class: type):
        """The positional runner of the trace's op for tapes of ``tape_class`` (made on first
        use: a lazy cell's trace records with its ``record``, and needs none), or None."""
        run = self.runners.get(tape_class)
        if run is None and tape_class in (Tape, LazyTape):
            run = self.runners[tape_class] = (
                positional_runner if tape_class is Tape else lazy_positional_runner)(self.info)
        return run

    def captured_now(self, serial: int) -> list | None:
        """The captured Variables, or None where the trace no longer holds for tape
        ``serial``: one is gone, was computed on another tape, or changed stop_gradient. A
        trace capturing only leaves notes them in ``checked`` for that tape, where a written
        call (``_written_call``) reads them without asking again."""
        found = []
        for ref, wants in zip(self.captured, self.captured_wants):
            v = ref()
            if v is None or v._tape not in (0, serial) or v.desc.stop_gradient == wants:
                return None
            found.append(v)
        if all(type(ref) is _Held for ref in self.captured):
            self.checked = (serial, stop_gradient_flips[0], found)
        return found


class _Held:
    """A strong reference with ``weakref.ref``'s call."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __call__(self):
        return self.v


def _trace(fn, name: str, args: tuple, outer) -> _Trace:
    """Run ``fn`` (called ``name``) on placeholders of ``args`` on a recording LazyTape and
    register the op of what it recorded. The recorder takes the serial of ``outer``, the tape
    the call records on, so that the Variables recorded there read as current, not stale."""
    placeholders = [new_variable(VarDesc(f"{name}.arg{i}", a.desc.shape, a.desc.dtype,
                                         stop_gradient=a.desc.stop_gradient),
                                 shape_only(a.desc.shape, a.desc.dtype), 0, a.place)
                    for i, a in enumerate(args)]
    recorder = LazyTape(tracing=True)
    recorder.serial = outer.serial
    with using_tape(recorder), forbid_value_reads():
        result = fn(*placeholders)
    outputs = [result] if isinstance(result, Variable) else result
    if not isinstance(outputs, (tuple, list)) or not outputs or \
            not all(isinstance(v, Variable) for v in outputs):
        raise InvalidArgumentError(f"tape.function {name}: the function must return a Variable "
                                   f"or a tuple/list of Variables; it returned {result!r}")
    graph, captured = _graph(recorder, placeholders, outputs, name)
    return _Trace(register_function_op(graph, name), input_slots(graph), args, captured)


def _graph(recorder, placeholders: list, outputs: list, name: str) -> tuple:
    """``(Graph, captured Variables)`` of the ops on ``recorder`` that ``outputs`` need."""
    handles = list(recorder)
    for h in handles:
        if h.plan.shaped_by_values:     # (the recorder ran it at once, on placeholders)
            raise InvalidArgumentError(
                f"tape.function {name}: its op {h.type} has an output shape that only values "
                f"tell, which a trace cannot hold (an RNN cell's zero state made inside: pass "
                f"the state as an argument)")
    made_by = {id(e.desc): n for n, h in enumerate(handles)
               for es in h.outputs.values() for e in es}
    for v in outputs:
        if id(v.desc) not in made_by:
            raise InvalidArgumentError(
                f"tape.function {name}: it returns {v.name}, which no op inside it computed "
                f"(an argument or a captured Variable as it is); return an op's result")
    needed, wanted = set(), {id(v.desc) for v in outputs}
    for n in range(len(handles) - 1, -1, -1):
        if any(id(e.desc) in wanted for es in handles[n].outputs.values() for e in es):
            needed.add(n)
            wanted.update(id(e.desc) for es in handles[n].inputs.values() for e in es)
    kept = [handles[n] for n in sorted(needed)]
    index = {id(p.desc): i for i, p in enumerate(placeholders)}
    captured = []
    for h in kept:
        for es in h.inputs.values():
            for e in es:
                if id(e.desc) not in index and id(e.desc) not in made_by:
                    index[id(e.desc)] = len(placeholders) + len(captured)
                    captured.append(e)
    size = len(index)
    steps = []
    for h in kept:
        info = h.plan.info
        ins = tuple((s.name, s.duplicable, tuple(index[id(e.desc)]
                                                 for e in h.inputs.get(s.name, ())))
                    for s in info.inputs)
        for es in h.outputs.values():
            for e in es:
                index[id(e.desc)] = size
                size += 1
        outs = tuple((s.name, s.duplicable, tuple(index[id(e.desc)]
                                                  for e in h.outputs.get(s.name, ())))
                     for s in info.outputs)
        steps.append(Step(info, h.plan.attrs, h.plan.attrs_key, ins, outs))
    inputs = placeholders + captured
    graph = Graph(tuple(steps), len(placeholders),
                  tuple(not v.desc.stop_gradient for v in inputs),
                  tuple(v.desc.dtype for v in inputs),
                  tuple(index[id(v.desc)] for v in outputs), size, placeholders[0].place,
                  tuple((tuple(v.desc.shape), v.desc.dtype) for v in inputs))
    return graph, captured
