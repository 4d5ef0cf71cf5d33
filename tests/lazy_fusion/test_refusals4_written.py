"""Branches of the written forward and backward of a unit schedule (``tape.unit_forward``,
``tape.unit_backward``) that the other tests leave unreached, each driven by a user's lazy
training step and shown taken (in the written source, or by what the writer was given): a
batch input gathered from a batch's rows and arrays given to single ops; in the backward, a
gradient added by rows into a unit's gradient whose first part a kernel made (copied first),
one value's rows read by every op of a batch (summed), blocks of a stacked batch added into
rows of a batch with offsets, a temporary between a user op's two grad ops, an optional
output gradient that never arrives. Results bit for bit the uncached path's throughout
(``test_unit_backward_written.cached_steps`` also checks every sample's gradient and makes
the grad kernels' arrays read-only). And, expected to fail until ``unit_forward`` is fixed,
a lone op reading a given array in a list (its written forward raises)."""
import re

import numpy as np
import test_unit_schedule
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_backward_written import cached_steps
from test_unit_forward import training_step
from test_unit_schedule import WIDTH, sequences, weights
from test_unit_written import assert_written_as_uncached

from tape import Variable, ops, unit_backward, unit_forward
from tape.desc import OpDesc
from tape.ops.rules import float_same_as
from tape.registry import GradMaker, grad_name, kernel, register_op


def test_a_batch_input_of_rows_and_given_arrays_is_written_in_op_order(monkeypatch):
    """Each sequence's first product plus its start state: an array given to the op in odd
    sequences, ``tanh`` of a given array (one batch) in even ones. The additions' batch takes its
    start states from that batch's rows and the given arrays, put back in op order."""
    params = weights()
    in_op_order_code, given_parts = unit_forward.in_op_order_code, []

    def watched(parts, *args):
        given_parts.extend(code for _, code, _ in parts if re.fullmatch(r"a\d+", code))
        return in_op_order_code(parts, *args)
    monkeypatch.setattr(unit_forward, "in_op_order_code", watched)

    def losses(w, u, seed):
        start = np.full((1, WIDTH), 0.5, np.float32)
        for n, x in enumerate(sequences(1, seed)):
            state = Variable(start * n) if n % 2 else \
                ops.tanh(Variable(start * n, stop_gradient=False))
            first = ops.matmul_v2(Variable(x, stop_gradient=False), w)
            yield ops.mean(ops.matmul_v2(ops.tanh(first + state), u))

    assert_written_as_uncached(
        lambda seed: training_step(params, lambda w, u: list(losses(w, u, seed))),
        [1, 1, 1, 1, 1, 2])
    assert len(given_parts) == 3    # (the odd sequences' start states, once: when written)


def row_read_first_losses(data):
    """``step``'s first products, each sequence's ``tanh`` read whole by the next batch and,
    for sequence 2, by a lone ``scale`` too, which runs first (nothing can join it): backward
    reaches the batch first, whose gradient of that ``tanh`` is its kernel's array, and the
    lone op's part goes into sequence 2's rows of it."""
    def losses(w, u):
        for n, sequence in enumerate(data):
            given = test_unit_schedule.Variable(sequence, stop_gradient=False)  # (noted)
            h = ops.tanh(ops.matmul_v2(given, w))
            if n == 2:
                yield ops.reduce_sum(ops.scale(h, scale=3.0), reduce_all=True)
            yield ops.mean(ops.tanh(ops.matmul_v2(h, u)))
    return losses


def written_sources(monkeypatch) -> list:
    """A list that gets the source of each backward ``tape.unit_backward`` writes."""
    sources = []

    def compiling(source, *args):
        sources.append(source)
        return compile(source, *args)
    monkeypatch.setattr(unit_backward, "compile", compiling, raising=False)
    return sources


def written_line(monkeypatch, losses_of, pattern: str) -> None:
    """``cached_steps`` of ``losses_of``, whose one written backward has a line that
    matches ``pattern``."""
    sources = written_sources(monkeypatch)
    cached_steps(monkeypatch, losses_of)
    source, = sources
    assert re.search(pattern, source, re.MULTILINE), source


def test_rows_added_into_a_kernel_made_gradient_copy_it_first(monkeypatch):
    """The written backward copies the gradient it was handed whole before adding a part
    into its rows (``cached_steps`` makes the kernel's array read-only: an add into it
    raises)."""
    written_line(monkeypatch, row_read_first_losses, r"^ +(g\d+_0) = \1\.copy\(\)$")


def shared_state_losses(data):
    """Every sequence's first character plus one state, ``tanh`` of a given array (a lone
    op): the sum's batch reads that op's output once per op, so its gradient is the sum
    of their rows."""
    def losses(w, u):
        state = ops.tanh(test_unit_schedule.Variable(np.full((1, WIDTH), 0.5, np.float32),
                                                     stop_gradient=False))     # (noted)
        for sequence in data:
            given = test_unit_schedule.Variable(sequence[:1], stop_gradient=False)
            yield ops.mean(ops.matmul_v2(ops.tanh(ops.matmul_v2(given, w) + state), u))
    return losses


def test_rows_of_one_value_read_by_a_batch_are_summed(monkeypatch):
    written_line(monkeypatch, shared_state_losses,
                 r"^ +g\d+_0 = g\[c\d+\]\.reshape\(c\d+\)\.sum\(axis=0\)")


def two_lengths_losses(data):
    """Sequences of 2 and of 3 characters: one batch of products with offsets, and the
    means of each length (stacked: one block per sequence) read a run of its rows."""
    def losses(w, u):
        for n, sequence in enumerate(data):
            given = test_unit_schedule.Variable(sequence[:2 + n // 3], stop_gradient=False)
            yield ops.mean(ops.tanh(ops.matmul_v2(ops.tanh(ops.matmul_v2(given, w)), u)))
    return losses


def test_blocks_of_a_stacked_batch_go_into_rows_of_a_batch_with_offsets(monkeypatch):
    written_line(monkeypatch, two_lengths_losses,
                 r"^ +g\d+_0\[c\d+\] \+= .*\.reshape\(c\d+\)$")


class _TwoStepGrad(GradMaker):
    """``X@GRAD = 2 * (1.5 * Out@GRAD)``, as two ``scale`` ops: the first one's output a
    temporary that only the second reads."""

    grads = ("X",)

    def make(self, op):
        out_grad = grad_name(op.outputs["Out"][0])
        temporary = out_grad + "@HALF"
        return [_scale(out_grad, temporary, 1.5), _scale(temporary, grad_name(op.inputs["X"][0]),
                                                         2.0)]


def _scale(source: str, target: str, factor: float) -> OpDesc:
    return OpDesc("scale", {"X": [source]}, {"Out": [target]},
                  {"scale": factor, "bias": 0.0, "bias_after_scale": True})


def test_a_temporary_between_grad_ops_is_a_local_of_the_unit(monkeypatch, user_ops):
    """A user's op ``Out = 3 X`` whose grad maker writes two ops, the second reading the
    first's output (run once per sequence: no batch rule)."""
    register_op("triple", inputs=["X"], outputs=["Out"], infer_shape=float_same_as("X"),
                grad=_TwoStepGrad())
    kernel("triple")(lambda X: X * 3.0)

    def losses_of(data):
        def losses(w, u):
            for sequence in data:
                given = test_unit_schedule.Variable(sequence, stop_gradient=False)  # (noted)
                yield ops.mean(ops.matmul_v2(ops.triple(ops.tanh(ops.matmul_v2(given, w))), u))
        return losses
    written_line(monkeypatch, losses_of, r"^ +t0 = r\[0\]$")


def cross_entropy_losses(data):
    """Each sequence's characters classified (their labels from their values): of
    ``softmax_with_cross_entropy``'s outputs only the loss is read, so its grad op's
    optional gradient of the softmax never arrives."""
    def losses(w, u):
        for sequence in data:
            given = test_unit_schedule.Variable(sequence, stop_gradient=False)  # (noted)
            labels = np.argmax(sequence, axis=1).reshape(-1, 1).astype(np.int64)
            logits = ops.matmul_v2(ops.tanh(ops.matmul_v2(given, w)), u)
            yield ops.mean(ops.softmax_with_cross_entropy(logits, Variable(labels))[1])
    return losses


def test_an_optional_output_gradient_that_never_arrives_is_left_out(monkeypatch):
    written_line(monkeypatch, cross_entropy_losses, r"'Softmax@GRAD': None")


def test_a_lone_op_reading_a_given_array_in_a_list_is_written():
    """The sequences' last states and one given array summed by one op (nothing joins
    it): the written forward reads the list as ``arrays_of`` does (a check of the list for
    None by ``in`` once compared the array with None and raised)."""
    params, bias = weights(), np.full((1, WIDTH), 0.25, np.float32)

    def losses(w, u, seed):
        lasts = [ops.tanh(ops.matmul_v2(ops.tanh(ops.matmul_v2(
            Variable(x, stop_gradient=False), w)), u)) for x in sequences(1, seed)]
        return [ops.mean(ops.sum(lasts + [Variable(bias)]))]

    assert_written_as_uncached(
        lambda seed: training_step(params, lambda w, u: losses(w, u, seed)),
        [1, 1, 1, 1, 1, 2])
