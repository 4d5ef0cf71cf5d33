"""Dynamic (DyNet-style) training steps, float32, in Tape beside the same models in PyTorch.

Python rebuilds the graph at every step, so these measure what a define-by-run library costs
per op in the models it is made for:

- LSTMCell: one step, batch 1, input 32, hidden 32 from a random state; forward and backward of
  sum(h') + sum(c'), no update.
- Tree-LSTM: the binary Tree-LSTM of Tai et al. (2015), hidden 64, over one random binary tree
  of 10-30 leaves per step (leaves: 64-wide embeddings of words from a vocabulary of 1000); a
  5-class softmax cross-entropy of the root's h, then SGD (lr 0.05).
- char LM: an LSTMCell (embedding 32, hidden 64) unrolled over 30 characters of a 60-symbol
  vocabulary, batch 1; mean cross-entropy of the next character at every step, then SGD
  (lr 0.05).
- Tree-LSTM, 16 trees per tape, and char LM, 16 separate sequences per tape: the mean loss of
  16 samples in one graph, one backward and one SGD step (figures per sample): what lazy
  Tape's autobatching is for.

Tape runs eagerly and lazily (``with tape.lazy():``, autobatching on): the same model, data and
parameters, one tape per step.

    .venv/bin/python benchmarks/dynamic.py [--quick]

PyTorch and numpy's BLAS run on one thread (these products are far too small for more);
PyTorch uses its own layers
(nn.LSTMCell, nn.Linear, nn.Embedding), from Tape's initial parameters and on the same data;
one step's gradients are compared before timing.
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np
from harness import (
    TAPE,
    TORCH,
    OtherLoad,
    import_tape_or_reason,
    import_torch,
    measure,
    parse_args,
    print_notes,
    print_table,
    threads_report,
    timing_options,
)

TAPE_NEEDS = ("layers.LSTMCell", "layers.Embedding", "layers.Linear", "optim.SGD",
              "ops.softmax_with_cross_entropy", "ops.concat", "ops.split", "ops.reduce_sum")
LEARNING_RATE = 0.05
CELL_INPUT, CELL_HIDDEN = 32, 32
TREE_VOCAB, TREE_EMBED, TREE_HIDDEN, TREE_CLASSES = 1000, 64, 64, 5
TREE_LEAVES = (10, 30)
TREES = 10                      # trees per timed call (one step each)
CHAR_VOCAB, CHAR_EMBED, CHAR_HIDDEN, CHAR_LENGTH = 60, 32, 64, 30
RTOL = 1e-4
FOREST = 16                     # trees per tape in the forest workload
TAPE_LAZY = "Tape, lazy"


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


def tree_lstm_tape(tape, samples):
    """Leaf: i, o, u from the word's embedding, c = i * u. Node: i, f_left, f_right, o, u from
    [h_left, h_right], c = i * u + f_left * c_left + f_right * c_right. Both: h = o * tanh(c)."""
    layers, ops = tape.layers, tape.ops
    embed = layers.Embedding(TREE_VOCAB, TREE_EMBED)
    leaf_gates = layers.Linear(TREE_EMBED, 3 * TREE_HIDDEN)
    node_gates = layers.Linear(2 * TREE_HIDDEN, 5 * TREE_HIDDEN)
    classify = layers.Linear(TREE_HIDDEN, TREE_CLASSES)

    def encode(tree):
        if isinstance(tree, tuple):
            (h_left, c_left), (h_right, c_right) = encode(tree[0]), encode(tree[1])
            gates = node_gates(ops.concat([h_left, h_right], axis=1))
            i, f_left, f_right, o, u = ops.split(gates, num=5, axis=1)
            c = (ops.sigmoid(i) * ops.tanh(u) + ops.sigmoid(f_left) * c_left
                 + ops.sigmoid(f_right) * c_right)
        else:
            i, o, u = ops.split(leaf_gates(embed(tree)), num=3, axis=1)
            c = ops.sigmoid(i) * ops.tanh(u)
        return ops.sigmoid(o) * ops.tanh(c), c

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


def char_lm_tape(tape, samples):
    """Embed all characters at once, cut into steps, run the cell, project every h at once."""
    layers, ops = tape.layers, tape.ops
    embed = layers.Embedding(CHAR_VOCAB, CHAR_EMBED)
    cell = layers.LSTMCell(CHAR_EMBED, CHAR_HIDDEN)
    project = layers.Linear(CHAR_HIDDEN, CHAR_VOCAB)

    def loss(inputs, targets):
        state, hs = None, []
        for x in ops.split(embed(inputs), num=CHAR_LENGTH, axis=0):
            state = cell(x, state)
            hs.append(state[0])
        logits = project(ops.concat(hs, axis=0))
        return ops.mean(ops.softmax_with_cross_entropy(logits, targets)[1])

    params = [p for layer in (embed, cell, project) for p in layer.params()]
    return params, [functools.partial(loss, _tape_ids(tape, ids[:-1]),
                                      _tape_ids(tape, ids[1:, None])) for ids in samples]


def char_lm_torch(torch, samples):
    nn = torch.nn
    embed = nn.Embedding(CHAR_VOCAB, CHAR_EMBED)
    cell = nn.LSTMCell(CHAR_EMBED, CHAR_HIDDEN)
    project = nn.Linear(CHAR_HIDDEN, CHAR_VOCAB)

    def loss(inputs, targets):
        state, hs = None, []
        for x in embed(inputs).split(1, dim=0):
            state = cell(x, state)
            hs.append(state[0])
        return nn.functional.cross_entropy(project(torch.cat(hs, dim=0)), targets)

    twins = [(embed.weight, False)] + _lstm_twins(cell) + _linear_twins(project)
    return twins, [functools.partial(loss, _torch_ids(torch, ids[:-1]), _torch_ids(torch, ids[1:]))
                   for ids in samples]


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


# --- shared plumbing -----------------------------------------------------------------------

WORKLOADS = (
    # title, samples(rng), tape model, torch model, SGD learning rate (None: no update)
    (f"LSTMCell step: batch 1, input {CELL_INPUT}, hidden {CELL_HIDDEN}, forward + backward",
     lstm_cell_samples, lstm_cell_tape, lstm_cell_torch, None),
    (f"Tree-LSTM step: random binary trees of {TREE_LEAVES[0]}-{TREE_LEAVES[1]} leaves, "
     f"hidden {TREE_HIDDEN}, + SGD", tree_samples, tree_lstm_tape, tree_lstm_torch,
     LEARNING_RATE),
    (f"char-LSTM LM step: {CHAR_LENGTH} characters, vocabulary {CHAR_VOCAB}, embedding "
     f"{CHAR_EMBED}, hidden {CHAR_HIDDEN}, + SGD", char_samples, char_lm_tape, char_lm_torch,
     LEARNING_RATE),
    (f"Tree-LSTM, {FOREST} trees per tape: {TREE_LEAVES[0]}-{TREE_LEAVES[1]} leaves, hidden "
     f"{TREE_HIDDEN}, one backward + SGD per {FOREST} trees (per tree)", forest_samples,
     forest_tape, one_graph_torch(tree_lstm_torch), LEARNING_RATE),
    (f"char-LSTM LM, {FOREST} separate sequences per tape: {CHAR_LENGTH} characters, hidden "
     f"{CHAR_HIDDEN}, one backward + SGD per {FOREST} sequences (per sequence)",
     char_batch_samples, one_graph_tape(char_lm_tape), one_graph_torch(char_lm_torch),
     LEARNING_RATE),
)


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


def copy_parameters(torch, tape_params, twins) -> None:
    """Give each PyTorch parameter its Tape twin's value (transposed where marked)."""
    with torch.no_grad():
        for param, (twin, transposed) in zip(tape_params, twins, strict=True):
            value = param.numpy()
            twin.copy_(torch.from_numpy(np.ascontiguousarray(value.T if transposed else value)))


def tape_training(tape, params, losses, learning_rate, lazy=False):
    """``(step, gradients)``: ``step()`` trains on every sample in turn (reset, forward,
    backward, SGD or clearing the gradients); ``gradients()`` are those of the first sample.
    ``lazy``: each tape records lazily (``tape.lazy``)."""
    sgd = tape.optim.SGD(learning_rate=learning_rate) if learning_rate else None
    mode = tape.lazy if lazy else contextlib.nullcontext

    def step():
        for loss in losses:
            with mode():
                tape.reset_global_tape()
                loss().backward()
            if sgd:
                sgd(params)
            else:
                for p in params:
                    p.grad = None

    def gradients():
        with mode():
            tape.reset_global_tape()
            losses[0]().backward()
        grads = [np.zeros(p.shape, p.dtype) if p.grad is None else p.grad.numpy().copy()
                 for p in params]
        for p in params:
            p.grad = None
        return grads

    return step, gradients


def torch_training(torch, twins, losses, learning_rate):
    """PyTorch's ``(step, gradients)``, as ``tape_training``'s; gradients in Tape's layout."""
    params = [param for param, _ in twins]
    sgd = torch.optim.SGD(params, lr=learning_rate or 0.0)     # without a rate: zero_grad only

    def step():
        for loss in losses:
            sgd.zero_grad()
            loss().backward()
            if learning_rate:
                sgd.step()

    def gradients():
        sgd.zero_grad()
        losses[0]().backward()
        grads = [param.grad.numpy().T.copy() if transposed else param.grad.numpy().copy()
                 for param, transposed in twins]
        sgd.zero_grad()
        return grads

    return step, gradients


def check_gradients(tape_params, tape_grads, torch_grads) -> str:
    """Tape's gradients against PyTorch's, each parameter within RTOL of its largest entry."""
    worst, wrong = 0.0, []
    for param, ours, theirs in zip(tape_params, tape_grads, torch_grads, strict=True):
        scale = max(float(np.abs(theirs).max()), 1e-30)
        difference = float(np.abs(ours - theirs).max()) / scale
        worst = max(worst, difference)
        if not np.allclose(ours, theirs, rtol=RTOL, atol=RTOL * scale):
            wrong.append(f"{param.name} (max |difference| {difference:.1e} of its largest)")
    if wrong:
        return "WRONG gradients from Tape vs PyTorch: " + ", ".join(wrong)
    return (f"gradients agree with PyTorch's on the first step ({len(tape_params)} parameters; "
            f"largest difference {worst:.1e} of a parameter's largest gradient)")


def run_workload(workload, tape, torch, options, notes) -> None:
    title, make_samples, tape_model, torch_model, learning_rate = workload
    samples = make_samples(np.random.default_rng(0))
    steps, checks = {}, []
    if tape is not None:
        tape.seed(0)
        tape_params, tape_losses = tape_model(tape, samples)
        steps[TAPE], tape_gradients = tape_training(tape, tape_params, tape_losses,
                                                     learning_rate)
        if hasattr(tape, "lazy"):
            steps[TAPE_LAZY], lazy_gradients = tape_training(tape, tape_params, tape_losses,
                                                             learning_rate, lazy=True)
    if torch is not None:
        twins, torch_losses = torch_model(torch, samples)
        if tape is not None:
            copy_parameters(torch, tape_params, twins)
        steps[TORCH], torch_gradients = torch_training(torch, twins, torch_losses,
                                                       learning_rate)
    if TORCH in steps and TAPE in steps:
        expected = torch_gradients()
        checks.append(check_gradients(tape_params, tape_gradients(), expected))
        if TAPE_LAZY in steps:
            checks.append("lazy: " + check_gradients(tape_params, lazy_gradients(), expected))
    else:
        checks.append("gradients not compared: " + (notes[TAPE] or notes[TORCH]))
    with OtherLoad() as load:
        seconds = measure(steps, **options)
    per_step = {lib: t * 1e3 / len(samples) for lib, t in seconds.items()}
    rows = [(lib, per_step.get(lib), notes.get(lib) or notes.get(TAPE))
            for lib in (TORCH, TAPE, TAPE_LAZY)]
    print_table(title, "ms per step", rows, baselines=(TORCH,), digits=3)
    print()
    print_notes(checks + [load.note()])


def one_blas_thread() -> None:
    """numpy's BLAS on one thread too, as PyTorch here: a second thread on these small products
    only contends for the other core (300x128 @ 128x320 took 2.7-7.7 ms on 2 threads of a busy
    machine, 0.5-0.8 ms on 1)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print("note: threadpoolctl is not installed; numpy's BLAS keeps its default threads "
              "(set OPENBLAS_NUM_THREADS=1 for a like-for-like run)")
        return
    threadpool_limits(1)


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv)
    options = timing_options(args.quick)
    torch = import_torch()
    if torch is not None:
        torch.set_num_threads(1)
    one_blas_thread()
    tape, tape_missing = import_tape_or_reason(*TAPE_NEEDS)
    notes = {TORCH: None if torch else "torch not importable", TAPE: tape_missing}
    print("## Dynamic training steps (DyNet style), float32, Tape (eager and lazy) beside "
          "PyTorch\n")
    print(threads_report(torch))
    for workload in WORKLOADS:
        run_workload(workload, tape, torch, options, notes)
    print()
    print_notes([f"Tree-LSTM: ms per step is the mean over {TREES} different trees (one step "
                 "each); every timed call trains on all of them."])


if __name__ == "__main__":
    main()
