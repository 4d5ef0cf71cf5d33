"""Cached executions of lazy backward: the same graph recorded again reuses the whole run.

A training loop records the same graph every iteration. Lazy backward's per-op path
(``tape.lazy_backward``) then re-decides per call what the graph fixes: the prune walk, the
grad ops, the fusion groups (``tape.fusion``), their order. Here that work is done once per
*graph signature* and kept as a *program*: a list of kernel calls, fused loops and gradient
sums over a table of values, that a later backward with the same signature runs after
gathering only its leaf arrays.

The signature is exact. Its parts:

- the graph as recorded, read at backward (recording writes nothing for it): every op's
  CallPlan (op type, attributes, input shapes and dtypes, which inputs want gradients, place),
  from the tape's handles in record order, and the loss's position among them (its key);
  then, by a *walker* written out for the graph of the key's first loss, each op of the
  loss's graph fetched from the op that reads it, and checked to be the op recorded at the
  same position on this tape, read by every reader the walker's graph had and by no other
  (the same ref object, output slot and index), and every input that graph was given still
  a given array. Nothing on the tape may have run before backward;
- the state of the graph now, read by the walker: none of its ops ran; the reference
  count of every op and of every ref to one of its outputs (a Variable the user still holds, a
  handle keeping a value for a gradient, a second ref: anything that decides what a group
  stores and which results are kept shows there);
- which of the gathered arrays are the same array (the leaves the forward ops read, the values
  the handles keep), and which handle entries are the same Variable and leaves. Where they
  are shared as in the walker's graph, the walker checks each against the first of its set
  there and returns only the firsts, whose pattern tells the whole; else its full form
  (``tape.replay_walker``) gathers them all.

A program is made only where it runs exactly what the per-op path runs: a graph on which the
batched backward (``tape.batched_backward``) does not apply, and no two ops (or groups) that
could run as one batch (the same batching signature, neither depending on the other), so that
each kernel call, loop and sum is the per-op path's, on the same inputs. The first backward of
a signature runs the per-op path; the second builds the program from that path's grad ops and
groups and runs it; later ones only run it. Arrays too small for fusion to pay when groups are
found per call (``fusion_steps.MIN_ELEMENTS``) join groups in a program, where the groups are
found once (``exp``, ``log``, ``tanh`` and ``sigmoid`` stay out there, as they do by default,
so results stay bit for bit those of the per-op path).

A graph whose ops could batch gets no program (a batch of matrix products rounds as one BLAS
call, so the per-op path's batches must be its batches), but its second backward keeps the
scheduler's kernel calls as a ``lazy_program.Schedule``: from the third on, the grad ops are
deferred as before and the same batches run in the same order, without the agenda's decisions
or the search for fused groups (the same state fixes them: the walker's checks above).

A graph whose backward goes by its forward batches (``tape.batched_backward``) gets a
``unit_schedule.UnitSchedule``: its second backward keeps the agenda's forward kernel calls,
and from the third on they run again over the walker's ops (no prune walk or agenda), each
batch gathering its inputs by the recipe its first run recorded, before the batched backward.
Where such a graph shows more states than are kept, it is refused as a whole (its walker
stops running).
"""
from __future__ import annotations

import operator
from itertools import repeat

import numpy as np

from . import flags as _flags
from .lazy_program import Schedule
from .replay_walker import NOT_ALIKE, write_walker
from .unit_schedule import UnitSchedule

_MISSING = object()
_entries: dict = {}     # (the handles' plans, loss position, output, index) -> _Entry, or None
_MAX_ENTRIES = 256
_seen: set = set()      # hashes of the signatures backward has seen once
_MAX_SEEN = 4096
# Graphs up to about 2,000 ops: a walker is a written-out line or two per op and edge, and
# Python compiles a function of tens of thousands of lines in seconds (7,800 ops: 19 s); the
# larger graphs of many samples per tape go by their forward batches (tape.batched_backward)
MAX_OPS = 2048
_plan_of = operator.attrgetter("plan")
_MAX_PROGRAMS = 8       # states of one graph with a program each (held values differ)
replays = 0             # backwards a cached program ran (tests check reuse)
unit_replays = 0        # backwards a UnitSchedule ran


class _Entry:
    """What one graph signature's executions share: its walker (``replay_walker.Walker``),
    its programs by state."""

    __slots__ = ("walk", "walker", "programs")

    def __init__(self):
        self.walk = self.walker = None     # (``walk``: the walker's own, ``_new_walker``)
        self.programs = {}      # state -> _Program, or None: the per-op path runs

    @property
    def positions(self) -> tuple:
        """The walker's ops' record positions, in its order."""
        return self.walker.positions


class Attempt:
    """A backward that no program serves yet; ``lazy_backward`` runs the per-op path and asks
    it, once the grad ops are deferred, to build a program (``build``)."""

    __slots__ = ("signature", "entry", "state", "arrays", "entries", "positions", "constants",
                 "schedule")

    def __init__(self, signature, entry, state, arrays, entries, schedule=None):
        self.signature = signature
        self.entry = entry
        self.state = state
        self.arrays = arrays
        self.entries = entries
        self.positions = {}
        self.constants = {}     # id(array) -> (array, "ones" or "zeros", shape, dtype)
        self.schedule = schedule    # the per-op path's kernel calls (lazy_program.Schedule)

    def refuse(self, schedule=None) -> None:
        """No program for this state: the per-op path runs for it from now on (the kernel
        calls ``schedule`` lists, where given: ``lazy_program.Schedule``)."""
        programs = self.entry.programs
        if len(programs) < _MAX_PROGRAMS:
            programs[self.state] = schedule

    def keep_units(self, turns: list) -> None:
        """This state's backward went by the forward batches (``tape.batched_backward``) in
        ``turns`` (``batched_backward._forward_batches``): from the next backward in this
        state, a ``UnitSchedule`` runs them again. Where there are none (fusion grouped
        ops), no program for this graph in any state: not even its walker runs from now on."""
        if not turns:
            if self.signature in _entries:
                _entries[self.signature] = None
            return
        places = {p: w for w, p in enumerate(self.entry.positions)}
        self.refuse(UnitSchedule(turns, places))


def attempt(handles: list, loss, records):
    """Backward of ``loss`` over ``handles`` by a cached program: True if it ran; else None,
    or an ``Attempt`` when a program may be built for this backward."""
    flags = _flags.flags
    ref = getattr(loss, "_lazy", None)     # (a slot eager Variables never set)
    if ref is None or getattr(records, "outputs_given", True) or \
            len(records) != len(handles) or len(handles) > MAX_OPS or \
            flags["FLAGS_check_nan_inf"] or not flags["FLAGS_lazy_batching"] or \
            not flags["FLAGS_lazy_fusion"]:     # (the NaN/Inf check names single ops)
        return None
    record = ref[0].record
    # (an op that ran before backward: the graph is not in its recorded state)
    if record is None or record[0] is not records or records.count(None) != len(records):
        return None
    signature = (tuple(map(_plan_of, handles)), record[1], ref[1], ref[2])
    entry = _entries.get(signature, _MISSING)
    if entry is _MISSING:
        # a graph recorded once is not worth a walker: its first backward leaves only its
        # signature's hash (a graph of thousands of ops is a long signature)
        number = hash(signature)
        if number not in _seen:
            if len(_seen) >= _MAX_SEEN:
                _seen.clear()
            _seen.add(number)
            return None
        if len(_entries) >= _MAX_ENTRIES:
            _entries.clear()
        entry = _entries[signature] = _Entry()
    if entry is None:
        return None
    if entry.walk is None:
        if not _new_walker(entry, ref[0], records, handles):
            _entries[signature] = None
            return None
    found = entry.walk(ref[0], handles, records)
    walker = entry.walker
    alike = found is not NOT_ALIKE
    if not alike:
        found = walker.walk_full(ref[0], handles, records)
        if found is None:
            return None
        ops, arrays, entries, counts = found
        pattern = _pattern(arrays, entries)
    elif found is None:
        return None
    else:   # (the firsts of the first graph's sets: their pattern tells the whole)
        ops, arrays, entries, counts = found
        pattern = (_pattern(arrays, entries),)
    found = None
    state = (counts, pattern)
    program = entry.programs.get(state, _MISSING)
    if type(program) is UnitSchedule:
        global unit_replays
        forward, ops = ops, None    # (the schedule drops the ops once they ran: their
        # results go as backward consumes them)
        if not program.run(forward, arrays, handles, records, loss):
            return None
        unit_replays += 1
        return True
    if program is None:
        return None
    if alike:   # (a program, and the per-op path it is built from, read every place)
        arrays, entries = walker.arrays(arrays), walker.entries(entries)
    if program is _MISSING or type(program) is Schedule:
        if program is _MISSING and len(entry.programs) >= _MAX_PROGRAMS:
            if UnitSchedule in set(map(type, entry.programs.values())):
                # (a graph that goes by units in more states than are kept: its walker no
                # longer pays, as before this graph had schedules)
                _entries[signature] = None
            return None
        ops = None      # (nothing may hold the ops while the per-op path groups them)
        return Attempt(signature, entry, state, arrays, entries,
                       None if program is _MISSING else program)
    global replays
    replays += 1
    handles.clear()
    program.run(ops, arrays, entries)
    return True


def _new_walker(entry, loss_op, records, handles) -> bool:
    """Write out ``entry``'s walker (``replay_walker.write_walker``) for the graph of
    ``loss_op``: False if the graph has an op off the tape, one that ran, or an input of a
    kind a program does not gather."""
    walker = write_walker(loss_op, records, handles)
    if walker is None:
        return False
    entry.walker, entry.walk = walker, walker.walk
    return True


def _pattern(arrays: tuple, entries: tuple):
    """Which gathered arrays (the forward ops' leaves, then the values of the handle entries
    beside them: ``_NO_VALUE`` for an entry that is no Variable) are one array, which handle
    entries are one Variable (per item, the position of the first that is the same object),
    and which entries are leaves. Many items by numpy's ``unique`` over their ids, as bytes
    (a graph of 16 sequences gathers ~2,000 arrays: 0.3 ms, a Python dict 0.9 ms); fewer
    than ``_UNIQUE_FROM`` by a dict, as a tuple, since ``unique`` costs ~20 µs before its
    first item (a 101-op chain's cached backward took 0.77 µs per op with it, 0.54 without,
    0.49 before either)."""
    items = [*arrays, *map(getattr, entries, repeat("_value"), repeat(_NO_VALUE)), *entries]
    leaves = bytes(map(operator.eq, map(getattr, entries, repeat("_tape"), repeat(None)),
                       repeat(0)))
    if len(items) < _UNIQUE_FROM:   # (a graph's items are as many in every state)
        seen = {}
        return tuple([seen.setdefault(id(x), k) for k, x in enumerate(items)]), leaves
    ids = np.fromiter(map(id, items), np.intp, len(items))
    _, firsts, where = np.unique(ids, return_index=True, return_inverse=True)
    return firsts[where].tobytes() + leaves


# items from which numpy's ``unique`` finds the firsts faster than a dict (where they cost
# the same: ~360 items, ~26 us; a 16-sequence step's firsts are 120: 8.7 us by a dict, 14.8
# by ``unique``; a 16-tree step's 990: 73 and 59)
_UNIQUE_FROM = 384


_NO_VALUE = object()
