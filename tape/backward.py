"""Eager backward: replay the tape in reverse through its ops' grad steps, releasing as it goes.

Each recorded op's grad steps are prepared and written out once per CallPlan
(``tape.grad_replay``); replaying a handle is a call of that function.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .desc import GRAD_SUFFIX, VarDesc
from .grad_replay import replay_of
from .handles import EagerHandle
from .place import CPU
from .variable import Variable, new_variable

_FROM_NUMPY = {np.dtype(dtypes.to_numpy(code)): code for code in dtypes.ALL}


# Called as ``hook(leaf)`` once a leaf's ``.grad`` is final, while backward goes on (no op left
# to replay reads the leaf), and as ``hook(None)`` when backward ends: data-parallel training
# (tape.distributed) sends gradients from there. With no hook, backward does no extra work.
grad_ready_hooks: list = []


def _last_readers(ops: list) -> dict:
    """``{op index: [leaf Variables]}``: where, replaying in reverse, each leaf's gradient is
    complete (the first op that reads it)."""
    first = {}
    for i, h in enumerate(ops):
        # (an EagerHandle's entries hold its outputs too, never a leaf: those are recorded)
        entries = h.entries if type(h) is EagerHandle else \
            [e for es in h.inputs.values() for e in es]
        for e in entries:
            if type(e) is Variable and e._tape == 0 and e.desc not in first:
                first[e.desc] = (i, e)
    done = {}
    for i, e in first.values():
        done.setdefault(i, []).append(e)
    return done


def _hand_over(ready, grads, leaves) -> None:
    """Set the ``.grad`` of the leaves in ``ready`` that got a gradient and call the hooks."""
    for leaf in ready:
        d = leaf.desc
        if leaves.pop(d, None) is not None:
            set_grad(leaf, grads.pop(d))
            for hook in grad_ready_hooks:
                hook(leaf)


def run_backward(ops: list, seeds: dict) -> None:
    """Replay ``ops`` (a spent tape's handles) in reverse from ``{VarDesc: seed gradient}``.

    Pops each handle as it is done, so what it kept is freed with it. Gradients are keyed by
    VarDesc, one per variable; leaves get theirs in ``.grad``, added out of place to what it
    held.
    """
    grads = dict(seeds)
    leaves = {}
    temps = {}
    summed = set()      # VarDescs whose gradient array the summing made
    ready = _last_readers(ops) if grad_ready_hooks else None
    while ops:
        if ready is not None and len(ops) in ready:    # after replaying the op at that index
            _hand_over(ready.pop(len(ops)), grads, leaves)
        h = ops.pop()
        replay = h.plan.replay
        if replay is None:
            replay = replay_of(h)
        replay(h, grads, temps, leaves, summed)
        del h
    if ready:
        _hand_over(ready.pop(0, ()), grads, leaves)
    for d, leaf in leaves.items():
        set_grad(leaf, grads[d])
    if ready is not None:
        for hook in grad_ready_hooks:
            hook(None)


def set_grad(leaf: Variable, g) -> None:
    """Give ``leaf`` the gradient ``g``, added to the one it has (every backward's last step)."""
    total = g if leaf.grad is None else leaf.grad._value + g
    name = leaf.desc.name + GRAD_SUFFIX
    # a host array of a supported dtype needs none of Variable()'s conversions
    code = _FROM_NUMPY.get(total.dtype) if type(total) is np.ndarray else None
    if code is not None and leaf.place is CPU:
        leaf.grad = new_variable(VarDesc(name, total.shape, code), total, 0, CPU)
    else:
        leaf.grad = Variable(total, name=name, place=leaf.place)
