"""The models of benchmarks/dynamic.py, in Tape and in PyTorch, and their data.

Each ``<model>_tape(tape, samples)`` returns ``(params, losses)``: Tape's parameters and one
zero-argument function per step that records that step's loss; ``<model>_torch(torch,
samples)`` returns ``(twins, losses)``, the PyTorch parameters in the order of Tape's with
whether each is stored transposed. ``benchmarks/dynet_models.py`` writes the same models for
DyNet.
"""
from __future__ import annotations

import functools

import numpy as np

LEARNING_RATE = 0.05
CELL_INPUT, CELL_HIDDEN = 32, 32
TREE_VOCAB, TREE_EMBED, TREE_HIDDEN, TREE_CLASSES = 1000, 64, 64, 5
TREE_LEAVES = (10, 30)
TREES = 10                      # trees per timed call (one step each)
CHAR_VOCAB, CHAR_EMBED, CHAR_HIDDEN, CHAR_LENGTH = 60, 32, 64, 30
FOREST = 16                     # trees per tape in the forest workload


# --- LSTMCell: one step, forward + backward ------------------------------------------------

def lstm_cell_samples(rng):
    """One ``(x, h, c)``, each float32 (1, size)."""
    return [tuple(rng.standard_normal((1, size)).astype(np.float32)
                  for size in (CELL_INPUT, CELL_HIDDEN, CELL_HIDDEN))]


def lstm_cell_tape(tape, samples):
    cell = tape.layers.LSTMCell(CELL_INPUT, CELL_HIDDEN)
    ops = tape.ops

    def loss(x, h, c):
        h, c = cell(x, (h, c))
        return ops.reduce_sum(h, reduce_all=True) + ops.reduce_sum(c, reduce_all=True)

    return cell.params(), [functools.partial(loss, *map(tape.Variable, sample))
                           for sample in samples]


def lstm_cell_torch(torch, samples):
    cell = torch.nn.LSTMCell(CELL_INPUT, CELL_HIDDEN)

    def loss(x, h, c):
        h, c = cell(x, (h, c))
        return h.sum() + c.sum()

    return _lstm_twins(cell), [functools.partial(loss, *map(torch.from_numpy, sample))
                               for sample in samples]


# --- binary Tree-LSTM ----------------------------------------------------------------------

def random_tree(rng, leaves: int):
    """A binary tree of ``leaves`` word ids: an int is a leaf, a pair ``(left, right)`` a node."""
    if leaves == 1:
        return int(rng.integers(TREE_VOCAB))
    left = int(rng.integers(1, leaves))
    return random_tree(rng, left), random_tree(rng, leaves - left)


def map_leaves(tree, convert):
    """``tree`` with each leaf replaced by ``convert(leaf)``."""
    if isinstance(tree, tuple):
        return tuple(map_leaves(child, convert) for child in tree)
    return convert(tree)


def tree_samples(rng):
    """``TREES`` ``(tree, label)`` pairs, 10-30 leaves each, labels in [0, 5)."""
    low, high = TREE_LEAVES
    return [(random_tree(rng, int(rng.integers(low, high + 1))), int(rng.integers(TREE_CLASSES)))
            for _ in range(TREES)]


def tree_lstm_tape(tape, samples, traced=False):
    """Leaf: i, o, u from the word's embedding, c = i * u. Node: i, f_left, f_right, o, u from
    [h_left, h_right], c = i * u + f_left * c_left + f_right * c_right. Both: h = o * tanh(c).
    With ``traced``, the leaf and the node cell are ``tape.function``s: one op per call."""
    layers, ops = tape.layers, tape.ops
    embed = layers.Embedding(TREE_VOCAB, TREE_EMBED)
    leaf_gates = layers.Linear(TREE_EMBED, 3 * TREE_HIDDEN)
    node_gates = layers.Linear(2 * TREE_HIDDEN, 5 * TREE_HIDDEN)
    classify = layers.Linear(TREE_HIDDEN, TREE_CLASSES)

    def leaf(word):
        i, o, u = ops.split(leaf_gates(embed(word)), num=3, axis=1)
        c = ops.sigmoid(i) * ops.tanh(u)
        return ops.sigmoid(o) * ops.tanh(c), c

    def node(h_left, c_left, h_right, c_right):
        gates = node_gates(ops.concat([h_left, h_right], axis=1))
        i, f_left, f_right, o, u = ops.split(gates, num=5, axis=1)
        c = (ops.sigmoid(i) * ops.tanh(u) + ops.sigmoid(f_left) * c_left
             + ops.sigmoid(f_right) * c_right)
        return ops.sigmoid(o) * ops.tanh(c), c

    if traced:
        leaf, node = tape.function(leaf), tape.function(node)

    def encode(tree):
        if isinstance(tree, tuple):
            return node(*encode(tree[0]), *encode(tree[1]))
        return leaf(tree)

    def loss(tree, label):
        logits = classify(encode(tree)[0])
        return ops.mean(ops.softmax_with_cross_entropy(logits, label)[1])

    params = [p for layer in (embed, leaf_gates, node_gates, classify) for p in layer.params()]
    word = functools.partial(_tape_ids, tape)
    return params, [functools.partial(loss, map_leaves(tree, word), word([[label]]))
                    for tree, label in samples]


def tree_lstm_torch(torch, samples):
    nn = torch.nn
    embed = nn.Embedding(TREE_VOCAB, TREE_EMBED)
    leaf_gates = nn.Linear(TREE_EMBED, 3 * TREE_HIDDEN)
    node_gates = nn.Linear(2 * TREE_HIDDEN, 5 * TREE_HIDDEN)
    classify = nn.Linear(TREE_HIDDEN, TREE_CLASSES)

    def encode(tree):
        if isinstance(tree, tuple):
            (h_left, c_left), (h_right, c_right) = encode(tree[0]), encode(tree[1])
            gates = node_gates(torch.cat([h_left, h_right], dim=1))
            i, f_left, f_right, o, u = gates.chunk(5, dim=1)
            c = (torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_left) * c_left
                 + torch.sigmoid(f_right) * c_right)
        else:
            i, o, u = leaf_gates(embed(tree)).chunk(3, dim=1)
            c = torch.sigmoid(i) * torch.tanh(u)
        return torch.sigmoid(o) * torch.tanh(c), c

    def loss(tree, label):
        return nn.functional.cross_entropy(classify(encode(tree)[0]), label)

    twins = [(embed.weight, False)] + [twin for layer in (leaf_gates, node_gates, classify)
                                       for twin in _linear_twins(layer)]
    word = functools.partial(_torch_ids, torch)
    return twins, [functools.partial(loss, map_leaves(tree, word), word(label))
                   for tree, label in samples]


# --- character LSTM language model ---------------------------------------------------------

def char_samples(rng):
    """One sequence of ``CHAR_LENGTH + 1`` character ids: inputs and next-character targets."""
    return [rng.integers(CHAR_VOCAB, size=CHAR_LENGTH + 1)]


def char_lm_tape(tape, samples, batched=False, traced=None):
    """Embed all characters at once, cut into steps, run the cell, project every h at once.
    One step per sample, or with ``batched`` one for all (``char_lm_batch_tape``). With
    ``traced="step"``, each step is a ``tape.function`` around the cell (one op per step); with
    ``traced="sequence"``, each sample's whole loss is one (one op per sequence). Either is
    given a zero first state."""
    layers, ops = tape.layers, tape.ops
    embed = layers.Embedding(CHAR_VOCAB, CHAR_EMBED)
    cell = layers.LSTMCell(CHAR_EMBED, CHAR_HIDDEN)
    project = layers.Linear(CHAR_HIDDEN, CHAR_VOCAB)
    start = step = None
    if traced:
        zeros = tape.Variable(np.zeros((1, CHAR_HIDDEN), np.float32))
        start = (zeros, zeros)
    if traced == "step":
        step = tape.function(lambda x, h, c: cell(x, (h, c)))

    def loss(inputs, targets):
        state, hs = start, []
        for x in ops.split(embed(inputs), num=CHAR_LENGTH, axis=0):
            state = step(x, *state) if step else cell(x, state)
            hs.append(state[0])
        logits = project(ops.concat(hs, axis=0))
        return ops.mean(ops.softmax_with_cross_entropy(logits, targets)[1])

    if traced == "sequence":
        loss = tape.function(loss)
    params = [p for layer in (embed, cell, project) for p in layer.params()]
    return params, [functools.partial(loss, _tape_ids(tape, inputs),
                                      _tape_ids(tape, targets[:, None]))
                    for inputs, targets in _char_steps(samples, batched)]


def char_lm_torch(torch, samples, batched=False):
    nn = torch.nn
    embed = nn.Embedding(CHAR_VOCAB, CHAR_EMBED)
    cell = nn.LSTMCell(CHAR_EMBED, CHAR_HIDDEN)
    project = nn.Linear(CHAR_HIDDEN, CHAR_VOCAB)

    def loss(inputs, targets):
        state, hs = None, []
        for x in embed(inputs).split(len(inputs) // CHAR_LENGTH, dim=0):
            state = cell(x, state)
            hs.append(state[0])
        return nn.functional.cross_entropy(project(torch.cat(hs, dim=0)), targets)

    twins = [(embed.weight, False)] + _lstm_twins(cell) + _linear_twins(project)
    return twins, [functools.partial(loss, _torch_ids(torch, inputs), _torch_ids(torch, targets))
                   for inputs, targets in _char_steps(samples, batched)]


def _char_steps(samples, batched):
    """``(inputs, targets)`` ids of each step: one sequence's, or with ``batched`` every
    sequence's (all of one length) as flat step-major arrays: step t holds rows t*n .. t*n+n-1
    of the n sequences."""
    ids = np.asarray(samples)
    if not batched:
        return [(sequence[:-1], sequence[1:]) for sequence in ids]
    return [(ids[:, :-1].T.reshape(-1), ids[:, 1:].T.reshape(-1))]


# --- 16 samples per tape: the Tree-LSTM and the char LM ------------------------------------

def forest_samples(rng):
    """``FOREST`` ``(tree, label)`` pairs, 10-30 leaves each: one graph."""
    low, high = TREE_LEAVES
    return [(random_tree(rng, int(rng.integers(low, high + 1))), int(rng.integers(TREE_CLASSES)))
            for _ in range(FOREST)]


def char_batch_samples(rng):
    """``FOREST`` separate sequences of ``CHAR_LENGTH + 1`` character ids: one graph."""
    return [rng.integers(CHAR_VOCAB, size=CHAR_LENGTH + 1) for _ in range(FOREST)]


def one_graph_tape(model):
    """``model``'s Tape version with every sample's loss in one graph: their mean."""
    def build(tape, samples):
        params, losses = model(tape, samples)
        return params, [lambda: tape.ops.scale(tape.ops.sum([loss() for loss in losses]),
                                               scale=1.0 / len(losses))]
    return build


def one_graph_torch(model):
    """``model``'s PyTorch version with every sample's loss in one graph: their mean."""
    def build(torch, samples):
        twins, losses = model(torch, samples)
        return twins, [lambda: sum(loss() for loss in losses) / len(losses)]
    return build


forest_tape = one_graph_tape(tree_lstm_tape)
char_lm_16_tape = one_graph_tape(char_lm_tape)
# the same with their cells as ``tape.function``s
forest_traced_tape = one_graph_tape(functools.partial(tree_lstm_tape, traced=True))
char_lm_16_traced_tape = one_graph_tape(functools.partial(char_lm_tape, traced="step"))
# and with each sequence's whole loss as a ``tape.function``
char_lm_16_sequence_tape = one_graph_tape(functools.partial(char_lm_tape, traced="sequence"))


# --- the char LM, 16 sequences batched by hand ---------------------------------------------

def char_lm_batch_tape(tape, samples):
    """``char_lm_tape``'s model on all ``samples`` at once, batched by hand: one LSTMCell call
    per step on a (16, embedding) batch, one projection and cross-entropy over every step and
    row. The sequences all have ``CHAR_LENGTH`` characters, so the batch needs no padding or
    mask; the mean over every row and step is the mean of the sequences' own mean losses
    (``char_lm_16_tape``'s loss)."""
    return char_lm_tape(tape, samples, batched=True)


def char_lm_batch_torch(torch, samples):
    return char_lm_torch(torch, samples, batched=True)


# --- shared plumbing -----------------------------------------------------------------------

def _tape_ids(tape, ids):
    return tape.Variable(np.asarray(ids, dtype=np.int64).reshape(np.shape(ids) or (1,)))


def _torch_ids(torch, ids):
    return torch.as_tensor(np.asarray(ids, dtype=np.int64).reshape(np.shape(ids) or (1,)))


def _lstm_twins(cell) -> list:
    """nn.LSTMCell's parameters as twins of Tape's LSTMCell's, which have the same layout and
    order (weight_ih, weight_hh, bias_ih, bias_hh)."""
    return [(getattr(cell, name), False)
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def _linear_twins(linear) -> list:
    """nn.Linear's parameters as twins of Tape's Linear ``w`` (in, out) and ``b``."""
    return [(linear.weight, True), (linear.bias, False)]

