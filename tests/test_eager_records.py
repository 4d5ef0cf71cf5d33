"""What an eager tape keeps per op, and that reference counting alone frees it: a recorded op is
an EagerHandle (one tuple of entries), read back as ``{slot: [entry]}`` on request, and a
training step leaves nothing for Python's cycle collector."""
import gc

import numpy as np
import pytest

import tape
from tape import layers, optim
from tape.handles import EagerHandle, OpHandle


@pytest.fixture
def saving_garbage():
    """``start()`` collects what is garbage now, then sets gc.DEBUG_SAVEALL: what a later
    collection finds stays in gc.garbage. Undone (and that garbage freed) after the test."""
    def start():
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
    yield start
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()


def _step(cell, head, x, state):
    tape.reset_global_tape()
    h, c = cell(x, state)
    parts = tape.ops.split(h, num=2, axis=1)        # a duplicable output
    joined = tape.ops.concat([parts[1], parts[0], c], axis=1)      # a duplicable input
    loss = tape.ops.mean(head(joined))
    loss.backward()
    return loss


def test_a_recorded_op_is_one_handle_and_one_tuple_of_entries():
    x = tape.Variable(np.ones((2, 3), np.float32), stop_gradient=False)
    tape.reset_global_tape()
    y = tape.ops.sigmoid(x)
    parts = tape.ops.split(y, num=3, axis=1)
    z = tape.ops.concat([parts[2], parts[0]], axis=1)
    handles = list(tape.get_global_tape())
    assert [type(h) for h in handles] == [EagerHandle] * 3
    assert all(isinstance(h, OpHandle) for h in handles)
    sigmoid, split, concat = handles
    # entries: inputs in slot order, then outputs; a value backward reads is the Variable,
    # else its VarDesc (sigmoid's grad reads Out; concat's reads no value of its inputs)
    assert sigmoid.entries == (x, y)
    assert split.entries == (y.desc, *(p.desc for p in parts))
    assert concat.entries == (parts[2].desc, parts[0].desc, z.desc)
    # the slot view, made on request
    assert sigmoid.inputs == {"X": [x]} and sigmoid.outputs == {"Out": [y]}
    assert split.outputs == {"Out": [p.desc for p in parts]}
    assert concat.inputs == {"X": [parts[2].desc, parts[0].desc]}
    assert repr(concat) == f"OpHandle(Out=['{z.name}'] = concat(X=['{parts[2].name}', " \
                           f"'{parts[0].name}']))"


def test_an_optional_input_takes_a_place_only_when_given():
    x = tape.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), stop_gradient=False)
    tape.reset_global_tape()
    out = tape.ops.clip(x, min=1.0, max=4.0)
    h = tape.get_global_tape()._ops[-1]
    assert sorted(h.inputs) == ["X"] and len(h.entries) == 2
    tape.ops.mean(out).backward()
    inside = (x.numpy() > 1) & (x.numpy() < 4)      # Paddle's clip_grad: strictly inside
    np.testing.assert_allclose(x.grad.numpy(), inside / 6, rtol=1e-6)


def test_recording_tracks_few_objects_per_op():
    """What the collector walks while a tape lives: per recorded op its handle, one tuple, and
    the outputs' VarDescs and Variables, no dicts or lists."""
    rng = np.random.default_rng(0)
    cell = layers.LSTMCell(8, 16)
    x = tape.Variable(rng.standard_normal((1, 8)).astype(np.float32))

    def record():
        tape.reset_global_tape()
        state = None
        for _ in range(5):
            state = cell(x, state)
        return state

    record()        # (every signature's plan made)
    tape.reset_global_tape()
    gc.collect()
    gc.disable()
    try:
        alive = gc.get_objects()    # (held, so no new object can reuse the id of one of them)
        before = {id(o) for o in alive}
        state = record()
        recorded = tape.get_global_tape()._ops
        grown = {}
        for o in gc.get_objects():
            if id(o) not in before and all(o is not x for x in (recorded, state, alive, before)):
                grown[type(o)] = grown.get(type(o), 0) + 1
        ops = len(recorded)
    finally:
        alive = None
        gc.enable()
    assert ops >= 40 and grown.get(EagerHandle) == ops
    assert grown.get(dict, 0) == 0 and grown.get(list, 0) == 0, grown
    assert sum(grown.values()) <= 4 * ops, grown


def test_a_training_step_leaves_no_cyclic_garbage(saving_garbage):
    """Reference counting frees every record, Variable and gradient of a step: the cycle
    collector finds nothing (the first step, which makes plans and loads kernels, is left out)."""
    rng = np.random.default_rng(1)
    cell, head = layers.LSTMCell(8, 16), layers.Linear(32, 4)
    sgd = optim.SGD(learning_rate=0.1)
    x = tape.Variable(rng.standard_normal((1, 8)).astype(np.float32))

    def train():
        _step(cell, head, x, None)
        sgd(cell.params() + head.params())

    train()
    saving_garbage()
    for _ in range(3):
        train()
    tape.reset_global_tape()
    assert gc.collect() == 0, [type(o).__name__ for o in gc.garbage][:20]
