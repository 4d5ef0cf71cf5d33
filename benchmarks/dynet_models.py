"""benchmarks/dynamic.py's models written for DyNet, from Tape's parameters and on its data.

Imported only by the DyNet peer process (``dynet_peer.py``), after it has chosen DyNet's
autobatching with ``dynet_config``: DyNet reads its configuration once, when it is imported.

Each ``build_<model>(params, samples, learning_rate)`` takes Tape's initial parameter values
in Tape's layout and order (the ``params`` of ``dynamic_models.py``'s ``*_tape`` functions) and
the samples as plain lists (a tree's inner node is a list ``[left, right]``, a leaf a word id),
and returns ``(steps, first_loss_and_gradients)``:

- ``steps["step"]()`` trains on every sample group in turn, as ``dynamic.tape_training``'s
  step does: a new graph, the loss, backward, a ``SimpleSGDTrainer`` update (clipping off, so
  it is plain SGD as Tape's and PyTorch's);
- ``first_loss_and_gradients()`` is the first group's loss and every parameter's gradient,
  converted back to Tape's layout and order, with no update.

DyNet's vectors are columns and its weights (out, in): a Tape ``Linear`` weight (in, out) is
transposed. DyNet's ``VanillaLSTMBuilder`` stacks its gates i, f, o, c(=g) where Tape's
``LSTMCell`` stacks i, f, g, o, and has one bias (``b_ih + b_hh`` here) and no added forget
bias (``forget_bias=0``).
"""
from __future__ import annotations

import dynet as dy
import numpy as np

CHAIN_PAIRS, CHAIN_SCALE, CHAIN_SHIFT = 50, 1.0001, 0.0001


def _weight(collection, tape_w):
    """A DyNet (out, in) parameter from a Tape ``Linear`` weight (in, out)."""
    return collection.parameters_from_numpy(np.ascontiguousarray(tape_w.T))


def _table(collection, tape_table):
    return collection.lookup_parameters_from_numpy(np.ascontiguousarray(tape_table))


def _tape_gates_to_dynet(stacked, hidden):
    """Rows (or entries) stacked i, f, g, o (Tape, PyTorch) restacked i, f, o, g (DyNet)."""
    i, f, g, o = (stacked[k * hidden:(k + 1) * hidden] for k in range(4))
    return np.ascontiguousarray(np.concatenate([i, f, o, g]))


def _dynet_gates_to_tape(stacked, hidden):
    i, f, o, g = (stacked[k * hidden:(k + 1) * hidden] for k in range(4))
    return np.concatenate([i, f, g, o])


class _Lstm:
    """A one-layer ``VanillaLSTMBuilder`` holding Tape ``LSTMCell`` parameters
    ``(weight_ih, weight_hh, bias_ih, bias_hh)``."""

    def __init__(self, collection, weight_ih, weight_hh, bias_ih, bias_hh):
        self.hidden = weight_hh.shape[1]
        self.builder = dy.VanillaLSTMBuilder(1, weight_ih.shape[1], self.hidden, collection,
                                             forget_bias=0.0)
        self.w_x, self.w_h, self.b = self.builder.get_parameters()[0]
        for param, value in ((self.w_x, weight_ih), (self.w_h, weight_hh),
                             (self.b, bias_ih + bias_hh)):
            param.set_value(_tape_gates_to_dynet(value, self.hidden))

    def tape_gradients(self):
        """Gradients of ``(weight_ih, weight_hh, bias_ih, bias_hh)`` in Tape's layout (the one
        bias's gradient is each of Tape's two biases' gradient)."""
        w_x, w_h, b = (_dynet_gates_to_tape(p.grad_as_array(), self.hidden)
                       for p in (self.w_x, self.w_h, self.b))
        return [w_x, w_h, b, b.copy()]


def _trainer(collection, learning_rate):
    trainer = dy.SimpleSGDTrainer(collection, learning_rate=learning_rate)
    trainer.set_clip_threshold(0)           # DyNet clips gradients at 5 by default
    return trainer


def _training(collection, losses, learning_rate, tape_gradients):
    """``({"step": step}, first_loss_and_gradients)`` for ``losses``, zero-argument functions
    that build one group's loss on a new graph. Without a ``learning_rate`` a step is forward
    and backward only (DyNet adds the gradients up; nothing reads them)."""
    trainer = _trainer(collection, learning_rate) if learning_rate else None

    def step():
        for loss in losses:
            dy.renew_cg()
            loss().backward()
            if trainer:
                trainer.update()

    def first_loss_and_gradients():
        dy.renew_cg()
        loss = losses[0]()
        value = loss.value()
        loss.backward()
        gradients = tape_gradients()
        for param in collection.parameters_list() + collection.lookup_parameters_list():
            param.scale_gradient(0.0)       # nothing of this check reaches the first update
        return value, gradients

    return {"step": step}, first_loss_and_gradients


def _mean(losses):
    return losses[0] if len(losses) == 1 else dy.esum(losses) * (1.0 / len(losses))


def _groups(samples, one_graph):
    """The sample groups of one step each: all samples in one graph, or one per graph."""
    return [samples] if one_graph else [[sample] for sample in samples]


# --- binary Tree-LSTM ----------------------------------------------------------------------

def build_tree_lstm(params, samples, learning_rate, one_graph=False):
    """``dynamic_models.tree_lstm_tape``: params ``[embedding (vocab, 64), leaf w (64, 192), leaf b,
    node w (128, 320), node b, classify w (64, 5), classify b]``; samples ``[tree, label]``."""
    embedding, leaf_w, leaf_b, node_w, node_b, class_w, class_b = params
    hidden = leaf_w.shape[1] // 3
    collection = dy.ParameterCollection()
    table = _table(collection, embedding)
    weights = [_weight(collection, w) for w in (leaf_w, node_w, class_w)]
    biases = [collection.parameters_from_numpy(b) for b in (leaf_b, node_b, class_b)]
    (w_leaf, w_node, w_class), (b_leaf, b_node, b_class) = weights, biases

    def gates(vector, parts):
        return [dy.pick_range(vector, k * hidden, (k + 1) * hidden) for k in range(parts)]

    def encode(tree):
        if isinstance(tree, list):
            (h_left, c_left), (h_right, c_right) = encode(tree[0]), encode(tree[1])
            i, f_left, f_right, o, u = gates(dy.affine_transform(
                [b_node, w_node, dy.concatenate([h_left, h_right])]), 5)
            c = dy.esum([dy.cmult(dy.logistic(i), dy.tanh(u)),
                         dy.cmult(dy.logistic(f_left), c_left),
                         dy.cmult(dy.logistic(f_right), c_right)])
        else:
            i, o, u = gates(dy.affine_transform([b_leaf, w_leaf, dy.lookup(table, tree)]), 3)
            c = dy.cmult(dy.logistic(i), dy.tanh(u))
        return dy.cmult(dy.logistic(o), dy.tanh(c)), c

    def loss(group):
        return _mean([dy.pickneglogsoftmax(dy.affine_transform(
            [b_class, w_class, encode(tree)[0]]), label) for tree, label in group])

    def tape_gradients():
        return ([table.grad_as_array()]
                + [g for w, b in zip(weights, biases)
                   for g in (w.grad_as_array().T, b.grad_as_array())])

    losses = [lambda group=group: loss(group) for group in _groups(samples, one_graph)]
    return _training(collection, losses, learning_rate, tape_gradients)


# --- character LSTM language model ---------------------------------------------------------

def _char_lm(params):
    """``(collection, run, tape_gradients)``: ``run(steps, targets)`` is the mean cross-entropy
    of ``targets`` (one id per step and batch row, step-major) after the LSTM read ``steps``
    (one embedded input per step: a vector, or a batch of vectors)."""
    embedding, weight_ih, weight_hh, bias_ih, bias_hh, project_w, project_b = params
    collection = dy.ParameterCollection()
    table = _table(collection, embedding)
    lstm = _Lstm(collection, weight_ih, weight_hh, bias_ih, bias_hh)
    w_out, b_out = _weight(collection, project_w), collection.parameters_from_numpy(project_b)
    vocabulary = w_out.shape()[0]

    def run(steps, targets):
        hs = [state.output() for state in lstm.builder.initial_state().add_inputs(steps)]
        logits = dy.affine_transform([b_out, w_out, dy.concatenate_cols(hs)])
        # (vocabulary, steps) per batch row -> one column per (row, step), as a batch
        logits = dy.reshape(logits, (vocabulary,), batch_size=len(targets))
        return dy.mean_batches(dy.pickneglogsoftmax_batch(logits, targets))

    def tape_gradients():
        return ([table.grad_as_array()] + lstm.tape_gradients()
                + [w_out.grad_as_array().T, b_out.grad_as_array()])

    return collection, table, run, tape_gradients


def build_char_lm(params, samples, learning_rate, one_graph=False):
    """``dynamic_models.char_lm_tape``: params ``[embedding (60, 32), weight_ih, weight_hh, bias_ih,
    bias_hh, project w (64, 60), project b]``; samples: sequences of ids, inputs then targets.
    Each sequence's LSTM reads it alone (batch 1)."""
    collection, table, run, tape_gradients = _char_lm(params)

    def sequence_loss(ids):
        return run([dy.lookup(table, i) for i in ids[:-1]], list(ids[1:]))

    losses = [lambda group=group: _mean([sequence_loss(ids) for ids in group])
              for group in _groups(samples, one_graph)]
    return _training(collection, losses, learning_rate, tape_gradients)


def build_char_lm_batch(params, samples, learning_rate):
    """``dynamic_models.char_lm_batch_tape``: every sequence (all of one length) a row of one batch
    that the LSTM reads together; the loss is the mean over every row and step, which is the
    mean of the sequences' own mean losses."""
    collection, table, run, tape_gradients = _char_lm(params)
    inputs = np.asarray(samples)[:, :-1]
    targets = np.asarray(samples)[:, 1:]
    # DyNet's batch is the last axis: logits (vocabulary, steps) per row, rows outermost
    flat_targets = [int(t) for row in targets for t in row]

    def loss():
        return run([dy.lookup_batch(table, [int(i) for i in column]) for column in inputs.T],
                   flat_targets)

    return _training(collection, [loss], learning_rate, tape_gradients)


# --- the 100-op chain ----------------------------------------------------------------------

def build_chain(params, samples, learning_rate):
    """``per_op.py``'s chain on ``params[0]`` (float32[32]): ``y * 1.0001``, ``y + 0.0001``,
    50 times each, then the sum. Steps: ``"step"`` forward and backward, ``"forward"`` the
    forward alone (the graph, the ops, the sum's value); the first "loss" is the sum and the
    gradient d sum / d x."""
    collection = dy.ParameterCollection()
    x = collection.parameters_from_numpy(params[0])

    def chain():
        y = x
        for _ in range(CHAIN_PAIRS):
            y = y * CHAIN_SCALE
            y = y + CHAIN_SHIFT
        return dy.sum_elems(y)

    def forward():
        dy.renew_cg()
        return chain().value()

    steps, check = _training(collection, [chain], None, lambda: [x.grad_as_array()])
    return {**steps, "forward": forward}, check


MODELS = {
    "tree_lstm": build_tree_lstm,
    "forest": lambda params, samples, rate: build_tree_lstm(params, samples, rate, True),
    "char_lm": build_char_lm,
    "char_lm_16": lambda params, samples, rate: build_char_lm(params, samples, rate, True),
    "char_lm_batch": build_char_lm_batch,
    "chain": build_chain,
}
