"""Tape and LazyTape, the per-thread global tape, ``no_grad`` and ``lazy``."""
from __future__ import annotations

import contextlib
import itertools
import threading

from . import flags as _flags
from . import lazy_runner as _lazy_runner
from . import pending as _pending
from .backward import run_backward
from .errors import InvalidArgumentError, PreconditionNotMetError
from .handles import EagerHandle, OpHandle
from .positional import make_positional, positional_slots
from .registry import OpInfo, op_info
from .runner import make_runner
from .runner_checks import fate, tape_spent
from .variable import Variable

_serials = itertools.count(1)


class _ThreadState(threading.local):
    """Per thread: the global tape and how deep inside ``no_grad`` and ``lazy`` blocks we
    are."""

    tape = None
    no_grad_depth = 0
    lazy_depth = 0


_local = _ThreadState()

# How many ``no_grad`` blocks are open, in all threads: while none is, a runner need not read
# its thread's depth (a thread-local read per op). Changed under a lock: ``+=`` on it is not
# atomic between threads.
_no_grad_blocks = [0]
_no_grad_lock = threading.Lock()


class Tape:
    """Records the ops that lead to Variables that want gradients; ``backward`` replays them."""

    __slots__ = ("serial", "_ops", "_spent", "tracing", "deferred")

    def __init__(self, tracing: bool = False):
        """``tracing=True``: record every op and keep every value (for export to a program),
        not only what backward needs."""
        self.serial = next(_serials)
        self._ops: list[OpHandle] = []
        self._spent = False
        self.tracing = tracing
        # per lazy record, where its op ran (``lazy_runner.Records``; a lazy tape has one from
        # the start, so that a lazy runner need not ask; else False: none)
        self.deferred = False

    @property
    def lazy(self) -> bool:
        """Whether ops run on this tape are recorded and computed when asked for."""
        return False

    def __len__(self):
        return len(self._ops)

    def __iter__(self):
        return iter(self._ops)

    def take_since(self, start: int) -> list:
        """Remove and return the records after the first ``start`` (static control flow moves
        a recorded loop body or branch off the tape, into a record of its own)."""
        taken = self._ops[start:]
        del self._ops[start:]
        return taken

    def append(self, record) -> None:
        """Record ``record``, an OpHandle or an object with its interface (``plan``, ``inputs``,
        ``outputs``), at the end of the tape."""
        self._ops.append(record)

    def add_op(self, type: str, inputs: dict, outputs: dict | None = None,
               attrs: dict | None = None) -> dict:
        """Run op ``type`` now and record it; returns ``{slot: [Variable]}`` of its outputs.

        ``inputs`` is ``{slot: [Variable]}``; ``outputs`` likewise, naming Variables to write
        (omitted: new Variables are made).
        """
        info = op_info(type)
        for slot in inputs:
            if slot not in info.input_names:
                raise InvalidArgumentError(f"{type}: unknown input slot '{slot}'; the op takes "
                                           f"{list(info.input_names)}")
        if outputs is not None:
            for slot in outputs:
                if slot not in info.output_names:
                    raise InvalidArgumentError(f"{type}: unknown output slot '{slot}'; the op "
                                               f"writes {list(info.output_names)}")
        return self.run(info, inputs, attrs, outputs)

    def run(self, info: OpInfo, inputs: dict, attrs, outputs=None) -> dict:
        """Check, infer, run the kernel and record: the body of every eager op, written out
        for the op's slots (``tape.runner``)."""
        return (info.runner or runner(info))(self, inputs, attrs, outputs)

    def backward(self, loss: Variable) -> None:
        """Gradients of ``loss`` (seeded with ones) into ``.grad`` of the leaves that want them."""
        if self._spent:
            raise PreconditionNotMetError(
                "backward was already run on this tape, which released its ops; call "
                "tape.reset_global_tape() and run the forward pass again")
        if loss._tape != self.serial:
            why = (f"was computed on an earlier tape, which {fate(loss._tape)}" if loss._tape
                   else "was not computed from any Variable with stop_gradient=False")
            raise PreconditionNotMetError(f"backward: {loss.name} {why}, so it has no gradient "
                                          f"to propagate")
        ops, self._ops, self._spent = self._ops, [], True
        tape_spent(self.serial)
        if self.deferred:   # lazy ops recorded: the grad ops are deferred and batched too
            from .lazy_backward import run_lazy_backward
            run_lazy_backward(ops, loss, self.deferred)
        else:
            run_backward(ops, {loss.desc: loss.place.array_module().ones_like(loss._value)})


class LazyTape(Tape):
    """A Tape whose ops compute nothing when run: each is checked and its shape rule asked (so
    errors point at the call), recorded, and its kernel run when a value it leads to is asked
    for (``tape.lazy``). ``with tape.lazy():`` makes the thread's global tape one."""

    __slots__ = ()

    def __init__(self, tracing: bool = False):
        super().__init__(tracing)
        self.deferred = _lazy_runner.Records()

    @property
    def lazy(self) -> bool:
        return True

    def run(self, info: OpInfo, inputs: dict, attrs, outputs=None, sig=None) -> dict:
        """Check, infer and record; the kernel runs later (``tape.runner`` with lazy=True).
        ``sig``: ``signature(attrs)``, when the caller has it (``tape.overloads``)."""
        return (info.lazy_runner or lazy_runner(info))(self, inputs, attrs, outputs, sig)


def get_global_tape() -> Tape:
    """This thread's tape (made on first use)."""
    t = _local.tape
    if t is None:
        t = _local.tape = _new_tape()
    return t


def reset_global_tape() -> Tape:
    """Start a new tape for this thread: once per training iteration, as in DyNet."""
    t = _local.tape = _new_tape()
    return t


def _lazy_mode() -> bool:
    return bool(_local.lazy_depth) or _flags.flags["FLAGS_lazy_execution"]


def _new_tape() -> Tape:
    return LazyTape() if _lazy_mode() else Tape()


def _follow_mode(t: Tape | None) -> None:
    """Make the thread's tape ``t`` record lazily or run eagerly, as the mode now says.

    The mode changes the tape's class, not a flag the tape reads: an eager op then pays
    nothing for lazy mode existing. Both classes have the same slots, so the tape keeps its
    recorded ops (lazy and eager ones mix on one tape, and one backward serves both)."""
    if t is not None and type(t) in (Tape, LazyTape):
        t.__class__ = LazyTape if _lazy_mode() else Tape
        if t.deferred is False and t.__class__ is LazyTape:
            t.deferred = _lazy_runner.Records()


def lazy() -> LazyBlock:
    """Inside the block, this thread's ops are recorded and computed only when a value is
    asked for (``value()``, ``numpy()``, ``item()``, ``np.asarray``, printing, ``backward()``),
    and then only the ops that value needs.

    Python's cycle collector is paused inside the block (and restored after it): recording a
    large graph makes many small objects, none in a cycle, and each collection walks all of
    them (profiled on a Tree-LSTM of 16 trees, collections took most of the recording time).
    Garbage in reference cycles made inside the block is freed when it ends: keep a lazy block
    to an iteration, or use FLAGS_lazy_execution (which pauses nothing) for a whole program.

    >>> with tape.lazy():
    ...     loss = tape.ops.mean(model(x))      # shapes checked here; nothing computed
    ...     loss.backward()                     # runs the forward ops, then backward
    """
    return LazyBlock()


class LazyBlock(_pending.collector_paused):
    """What ``lazy()`` returns: its block, with the collector paused. A class, not a
    generator context manager: a lazy block per iteration or per sample is common, and this
    costs a third of one."""

    __slots__ = ()

    def __enter__(self) -> None:
        _local.lazy_depth += 1
        _follow_mode(_local.tape)
        super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__()
        _local.lazy_depth -= 1
        _follow_mode(_local.tape)


def compute(*variables) -> None:
    """Compute the pending Variables among ``variables`` now, in one execution (seed 002's
    ``Forward``): what they need runs, each op once. Eager Variables are left as they are."""
    _pending.settle_all(variables)


_flags.on_change("FLAGS_lazy_execution", lambda: _follow_mode(_local.tape))

_RUNNER_ENV = {"local": _local, "no_grad_blocks": _no_grad_blocks,
               "restart": reset_global_tape, "OpHandle": OpHandle,
               "EagerHandle": EagerHandle,
               "pending_ref": _pending.pending_ref, "pending_value": _pending.pending_value,
               "lazy_lines": _lazy_runner.lazy_lines, "lazy_namespace": _lazy_runner.NAMESPACE,
               "lazy_gather_many": _lazy_runner.gather_many_lines,
               "lazy_tail": _lazy_runner.positional_tail}


def runner(info: OpInfo):
    """The eager runner of op ``info``, ``run(tape, inputs, attrs, outputs)`` (made on first
    use, then ``info.runner``): what ``Tape.run`` calls."""
    if info.runner is None:
        info.runner = make_runner(info, _RUNNER_ENV)
    return info.runner


_RUNNER_ENV["eager_runner"] = runner


def positional_runner(info: OpInfo):
    """The positional runner of op ``info``, ``run(tape, attrs, sig, *required inputs)``
    (made on first use, then ``info.positional``; ``tape.positional``), or None when the op's
    slots allow none."""
    if info.positional is None and positional_slots(info) is not None:
        info.positional = make_positional(info, _RUNNER_ENV)
    return info.positional


def lazy_positional_runner(info: OpInfo):
    """The lazy positional runner of op ``info`` (``tape.positional`` with lazy=True; made on
    first use, then ``info.lazy_positional``), or None when the op's slots allow none: what
    ``tape.ops.<type>`` and the operators call on a lazy tape."""
    if info.lazy_positional is None and positional_slots(info) is not None:
        info.lazy_positional = make_positional(info, _RUNNER_ENV, lazy=True)
    return info.lazy_positional


def lazy_runner(info: OpInfo):
    """The lazy runner of op ``info`` (made on first use, then ``info.lazy_runner``): what
    ``LazyTape.run`` calls."""
    if info.lazy_runner is None:
        info.lazy_runner = make_runner(info, _RUNNER_ENV, lazy=True)
    return info.lazy_runner


@contextlib.contextmanager
def using_tape(t: Tape):
    """Make ``t`` this thread's global tape inside the block; the previous one comes back after,
    also on an error."""
    previous = _local.tape
    _local.tape = t
    try:
        yield t
    finally:
        _local.tape = previous


@contextlib.contextmanager
def no_grad():
    """Run ops without recording them: their outputs never want gradients."""
    with _no_grad_lock:
        _no_grad_blocks[0] += 1
    _local.no_grad_depth += 1
    try:
        yield
    finally:
        _local.no_grad_depth -= 1
        with _no_grad_lock:
            _no_grad_blocks[0] -= 1
