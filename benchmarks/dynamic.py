"""Dynamic (DyNet-style) training steps, float32, in Tape beside PyTorch and DyNet.

Python rebuilds the graph at every step, so these measure what a define-by-run library costs
per op in the models it is made for (the models: ``dynamic_models.py``, and for DyNet
``dynet_models.py``):

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
  Tape's and DyNet's autobatching are for. Beside them, PyTorch trains on the same 16 samples
  one per step ("per-sample loop").
- char LM, the same 16 sequences batched by hand: one LSTM over a batch of 16, the floor that
  autobatching is measured against. Lazy Tape's hand batch is timed once more inside the
  16-sequence table (the row "... batched by hand (timed alongside)"), alternating with the
  rows it is compared with: the ratio issue 12 sets a target for comes from that one
  measurement, not from two tables timed minutes apart (the hand-batched table moved by half
  from one quiet run to the next, 0.33-0.54 ms per sequence, in every library at once).
- Tree-LSTM, 16 trees per tape, and char LM, 16 separate sequences per tape, once more with
  their cells as ``tape.function``s (the Tree-LSTM's leaf and node cells, the LM's LSTMCell
  step), run lazily: each cell call is one recorded op, and the calls of one depth or step
  batch (the row "Tape, lazy, cells as tape.function"). On a lazy tape Tape's LSTMCell records
  each call as one op by itself (``layers/recurrent.py``), so the LM's plain lazy rows batch
  its steps the same way; its traced row differs only in who made the function.
- char LM, 16 separate sequences per tape, once more with each sequence's whole loss (embedding,
  30 cell steps, projection, cross-entropy, mean) as one ``tape.function``, run lazily (the
  row "Tape, lazy, each sequence's loss as tape.function"): 16 calls of it, their sum and its
  scale are the step's 18 recorded ops. Its calls batch only where lazy Tape batches calls of
  a function that splits, concatenates or reduces along axis 0; elsewhere they run one by one.
- the 100-op chain of ``per_op.py`` (µs per op, forward with its value, and forward +
  backward). Issue 12 sets recording a lazy op (at most 1.5 µs) as a target of its own, so its
  "fused 100-op chain at most 1.0 µs per op, forward and backward" is read as the execution
  of a chain already recorded: from ``loss.backward()`` on a recorded lazy chain until the
  gradient is in place, per op (the row "Tape, lazy, executing forward + backward after
  recording"; the ratio table points the target at it). The lazy row of the same table times
  recording and execution together.

Tape runs eagerly and lazily (``with tape.lazy():``, autobatching and fusion on): the same
model, data and parameters, one tape per step. PyTorch and numpy's BLAS run on one thread
(these products are far too small for more); PyTorch uses its own layers (nn.LSTMCell,
nn.Linear, nn.Embedding). DyNet (``pip install dynet38``, optional) runs in two child
processes, autobatching off and on (``dynet_peer.py``), with its own layers where it has them
(VanillaLSTMBuilder), single-threaded as its CPU build is. Every peer starts from Tape's
initial parameters; before timing, one step's gradients (and DyNet's loss) are compared with
Tape's. The last table gives the throughput ratios issue 12 sets targets for.

    .venv/bin/python benchmarks/dynamic.py [--quick] [--cpu-time]

``--cpu-time`` times each library by the CPU time of its process (``time.process_time``)
instead of wall time: other load on a shared machine changes it less.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import NamedTuple

import dynamic_models as models
import numpy as np
import per_op
from dynamic_chain import run_chain
from dynamic_checks import (
    DYNET_OFF,
    DYNET_ON,
    LAZY_EXECUTION,
    LAZY_RECORDING,
    TAPE_LAZY,
    TAPE_LAZY_TRACED,
    check_gradients,
    check_loss,
)
from dynet_peer import DynetPeer, dynet_installed
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
TORCH_LOOP = "PyTorch, per-sample loop"
HAND_ALONGSIDE = f"{TAPE_LAZY}, the same {models.FOREST} batched by hand (timed alongside)"
TAPE_LAZY_SEQUENCE = f"{TAPE_LAZY}, each sequence's loss as tape.function"
FOREST, LENGTH = models.FOREST, models.CHAR_LENGTH


class Workload(NamedTuple):
    key: str
    title: str
    samples: Callable           # samples(rng)
    tape: Callable              # (params, losses) = tape(tape module, samples)
    torch: Callable             # (twins, losses) = torch(torch module, samples)
    learning_rate: float | None     # SGD's; None: no update
    dynet: str | None = None    # the model's name in dynet_models.MODELS
    torch_per_sample: Callable | None = None    # PyTorch, one sample per step, same samples
    unit: str = "ms per step"   # "ms per sample" where a step trains on all samples
    traced: Callable | None = None  # tape's model with its cells as tape.function (lazy row)
    # tape's model of the same samples batched by hand, timed lazily in this table's
    # alternation (the row HAND_ALONGSIDE), so that the ratio to it has no drift between tables
    alongside: Callable | None = None
    # tape's model with each sample's whole loss as one tape.function (the lazy row
    # TAPE_LAZY_SEQUENCE): one op per sample, whose calls batch where the function allows
    sequence_traced: Callable | None = None

    def own_lazy_models(self) -> list:
        """``(row, model)`` of the lazy rows whose model is not ``tape``'s, in the table's
        order."""
        return [(row, model) for row, model in ((TAPE_LAZY_TRACED, self.traced),
                                                (TAPE_LAZY_SEQUENCE, self.sequence_traced),
                                                (HAND_ALONGSIDE, self.alongside)) if model]


LR = models.LEARNING_RATE
WORKLOADS = (
    Workload("cell", f"LSTMCell step: batch 1, input {models.CELL_INPUT}, hidden "
             f"{models.CELL_HIDDEN}, forward + backward", models.lstm_cell_samples,
             models.lstm_cell_tape, models.lstm_cell_torch, None),
    Workload("tree", f"Tree-LSTM step: random binary trees of {models.TREE_LEAVES[0]}-"
             f"{models.TREE_LEAVES[1]} leaves, hidden {models.TREE_HIDDEN}, + SGD",
             models.tree_samples, models.tree_lstm_tape, models.tree_lstm_torch, LR,
             "tree_lstm"),
    Workload("lm", f"char-LSTM LM step: {LENGTH} characters, vocabulary {models.CHAR_VOCAB}, "
             f"embedding {models.CHAR_EMBED}, hidden {models.CHAR_HIDDEN}, batch 1, + SGD",
             models.char_samples, models.char_lm_tape, models.char_lm_torch, LR, "char_lm"),
    Workload("forest", f"Tree-LSTM, {FOREST} trees per tape: one backward + SGD per {FOREST} "
             "trees (per tree)", models.forest_samples, models.forest_tape,
             models.one_graph_torch(models.tree_lstm_torch), LR, "forest",
             models.tree_lstm_torch, "ms per sample", models.forest_traced_tape),
    Workload("lm_16", f"char-LSTM LM, {FOREST} separate sequences per tape: one backward + "
             f"SGD per {FOREST} sequences (per sequence)", models.char_batch_samples,
             models.char_lm_16_tape, models.one_graph_torch(models.char_lm_torch), LR,
             "char_lm_16", models.char_lm_torch, "ms per sample",
             models.char_lm_16_traced_tape, models.char_lm_batch_tape,
             models.char_lm_16_sequence_tape),
    Workload("lm_batch", f"char-LSTM LM, the same {FOREST} sequences batched by hand (batch "
             f"{FOREST}; per sequence)", models.char_batch_samples, models.char_lm_batch_tape,
             models.char_lm_batch_torch, LR, "char_lm_batch", unit="ms per sample"),
)


def copy_parameters(torch, tape_params, twins) -> None:
    """Give each PyTorch parameter its Tape twin's value (transposed where marked)."""
    with torch.no_grad():
        for param, (twin, transposed) in zip(tape_params, twins, strict=True):
            value = param.numpy()
            twin.copy_(torch.from_numpy(np.ascontiguousarray(value.T if transposed else value)))


def tape_training(tape, params, losses, learning_rate, lazy=False):
    """``(step, first)``: ``step()`` trains on every sample in turn (reset, forward, backward,
    SGD or clearing the gradients); ``first()`` is the first sample's ``(loss, gradients)``,
    with no update. ``lazy``: each tape records lazily (``tape.lazy``)."""
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

    def first():
        with mode():
            tape.reset_global_tape()
            loss = losses[0]()
            loss.backward()
            value = loss.item()
        grads = [np.zeros(p.shape, p.dtype) if p.grad is None else p.grad.numpy().copy()
                 for p in params]
        for p in params:
            p.grad = None
        return value, grads

    return step, first


def torch_training(torch, twins, losses, learning_rate):
    """PyTorch's ``(step, first)``, as ``tape_training``'s; gradients in Tape's layout."""
    params = [param for param, _ in twins]
    sgd = torch.optim.SGD(params, lr=learning_rate or 0.0)     # without a rate: zero_grad only

    def step():
        for loss in losses:
            sgd.zero_grad()
            loss().backward()
            if learning_rate:
                sgd.step()

    def first():
        sgd.zero_grad()
        loss = losses[0]()
        loss.backward()
        grads = [param.grad.numpy().T.copy() if transposed else param.grad.numpy().copy()
                 for param, transposed in twins]
        sgd.zero_grad()
        return loss.item(), grads

    return step, first


def run_workload(workload, tape, torch, peers, options, notes) -> dict:
    """Check, time and print one workload; ``{library: ms per sample}``."""
    samples = workload.samples(np.random.default_rng(0))
    steps, checks, rows = {}, [], [TORCH, TAPE, TAPE_LAZY]
    if tape is None:
        checks.append("nothing compared: " + notes[TAPE])
    else:
        tape.seed(0)
        tape_params, tape_losses = workload.tape(tape, samples)
        steps[TAPE], tape_first = tape_training(tape, tape_params, tape_losses,
                                                workload.learning_rate)
        steps[TAPE_LAZY], lazy_first = tape_training(tape, tape_params, tape_losses,
                                                     workload.learning_rate, lazy=True)
        tape_loss, tape_grads = tape_first()
        checks.append(check_gradients("Tape, lazy", tape_params, lazy_first()[1], tape_grads,
                                      "eager Tape"))
        for label, model in workload.own_lazy_models():
            tape.seed(0)    # the same initial parameters, trained on their own
            own_params, own_losses = model(tape, samples)
            steps[label], own_first = tape_training(tape, own_params, own_losses,
                                                    workload.learning_rate, lazy=True)
            checks.append(check_gradients(label, own_params, own_first()[1], tape_grads,
                                          "eager Tape"))
        if torch is not None:
            twins, torch_losses = workload.torch(torch, samples)
            copy_parameters(torch, tape_params, twins)
            steps[TORCH], torch_first = torch_training(torch, twins, torch_losses,
                                                       workload.learning_rate)
            checks.append(check_gradients("Tape", tape_params, tape_grads, torch_first()[1],
                                          TORCH))
            if workload.torch_per_sample:
                twins, torch_losses = workload.torch_per_sample(torch, samples)
                copy_parameters(torch, tape_params, twins)
                steps[TORCH_LOOP] = torch_training(torch, twins, torch_losses,
                                                   workload.learning_rate)[0]
        for peer in peers if workload.dynet else ():
            loss, grads = peer.build(workload.dynet, [p.numpy() for p in tape_params],
                                     samples, workload.learning_rate)
            checks += [check_loss(peer.name, loss, tape_loss, "eager Tape"),
                       check_gradients(peer.name, tape_params, grads, tape_grads, "eager Tape")]
            steps[peer.name] = peer.steps()
    if workload.torch_per_sample:
        rows.insert(1, TORCH_LOOP)
    after_lazy = rows.index(TAPE_LAZY) + 1
    rows[after_lazy:after_lazy] = [label for label, _ in workload.own_lazy_models()]
    if workload.dynet:
        rows += [DYNET_OFF, DYNET_ON]
    with OtherLoad(peer.pid for peer in peers) as load:
        seconds = measure(steps, **options)
    per_sample = {lib: t * 1e3 / len(samples) for lib, t in seconds.items()}
    table = [(lib, per_sample.get(lib), notes.get(lib) or notes.get(TAPE)) for lib in rows]
    print_table(workload.title, workload.unit, table, baselines=(TORCH, TAPE_LAZY), digits=3)
    print()
    print_notes(checks + [load.note()])
    return per_sample


# --- the ratios --------------------------------------------------------------------

def throughput(per_sample: dict, of: tuple, against: tuple):
    """Samples per second of ``of`` = (workload, library) over those of ``against``."""
    mine, theirs = per_sample.get(of[0], {}).get(of[1]), per_sample.get(against[0], {}).get(
        against[1])
    return None if mine is None or theirs is None else theirs / mine


def print_ratios(per_sample: dict, chain: dict) -> None:
    """Issue 12's ratios, from this run's figures, beside its targets and DyNet's figures."""
    rows = [(f"{lib}, {FOREST} trees per tape, vs PyTorch's per-tree loop",
             throughput(per_sample, ("forest", lib), ("forest", TORCH_LOOP)), target)
            for lib, target in ((TAPE_LAZY, "at least 5×"), (TAPE, "0.52× in the issue"),
                                (TORCH, ""), (DYNET_OFF, "10.8× in the issue (1188/110)"),
                                (DYNET_ON, "22.7× in the issue (2494/110)"))]
    rows.insert(1, (f"{TAPE_LAZY_TRACED}, {FOREST} trees per tape, vs PyTorch's per-tree loop",
                    throughput(per_sample, ("forest", TAPE_LAZY_TRACED), ("forest", TORCH_LOOP)),
                    "at least 5×"))
    # (Tape's lazy rows against the hand batch timed in their own table's alternation; the
    # other libraries against their rows of the hand-batched table)
    rows += [(f"{lib}, {FOREST} separate sequences per graph vs {TAPE_LAZY}'s hand-batched "
              f"{FOREST} (timed alongside)",
              throughput(per_sample, ("lm_16", lib), ("lm_16", HAND_ALONGSIDE)), "at least 0.9×")
             for lib in (TAPE_LAZY_TRACED, TAPE_LAZY, TAPE_LAZY_SEQUENCE)]
    rows += [(f"{lib}, {FOREST} separate sequences per graph vs the hand-batched {FOREST}",
              throughput(per_sample, ("lm_16", lib), ("lm_batch", lib)), target)
             for lib, target in ((TAPE, ""), (TORCH, ""), (DYNET_OFF, ""),
                                 (DYNET_ON, "0.57× in the issue"))]
    rows += [(f"{DYNET_ON} vs off, {FOREST} separate sequences",
              throughput(per_sample, ("lm_16", DYNET_ON), ("lm_16", DYNET_OFF)),
              "4.2× in the issue"),
             (f"{TAPE_LAZY} vs {TAPE}, {FOREST} separate sequences",
              throughput(per_sample, ("lm_16", TAPE_LAZY), ("lm_16", TAPE)), "")]
    print("\n### Throughput ratios (this run; above 1: the first is faster)\n")
    print("| ratio | this run | target, or the issue's figure |")
    print("| --- | ---: | --- |")
    for title, ratio, target in rows:
        print(f"| {title} | {'—' if ratio is None else f'{ratio:.2f}×'} | {target} |")
    for title, figure, target in (
            (f"{TAPE_LAZY} (fused), {per_op.OPS}-op chain, executing forward + backward after "
             "recording, µs per op", chain.get((LAZY_EXECUTION, "backward")), "at most 1.0"),
            (f"{TAPE_LAZY} (fused), {per_op.OPS}-op chain, recording + forward + backward, "
             "µs per op", chain.get((TAPE_LAZY, "backward")), ""),
            (f"{TAPE_LAZY}, recording one op of the chain (nothing computed), µs",
             chain.get((LAZY_RECORDING, "forward")), "at most 1.5")):
        print(f"| {title} | {'—' if figure is None else f'{figure:.2f}'} | {target} |")


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
    args = parse_args(__doc__.splitlines()[0], argv, extra=[
        ("--cpu-time", "time by each process's CPU time (time.process_time), not wall time")])
    options = timing_options(args.quick)
    options["clock"] = time.process_time if args.cpu_time else time.perf_counter
    torch = import_torch()
    if torch is not None:
        torch.set_num_threads(1)
    one_blas_thread()
    tape, tape_missing = import_tape_or_reason(*TAPE_NEEDS)
    dynet_missing = None if dynet_installed() else "dynet not installed"
    notes = {TORCH: None if torch else "torch not importable", TAPE: tape_missing,
             TORCH_LOOP: None if torch else "torch not importable",
             DYNET_OFF: dynet_missing, DYNET_ON: dynet_missing}
    print("## Dynamic training steps (DyNet style), float32: Tape (eager and lazy) beside "
          "PyTorch and DyNet\n")
    print(threads_report(torch))
    print(f"\nclock: {options['clock'].__name__} (" + ("CPU time of each library's process)"
          if args.cpu_time else "wall time; --cpu-time for CPU time)"))
    if dynet_missing:
        print(f"\nnote: {dynet_missing}, its rows are skipped (`.venv/bin/pip install "
              "dynet38`, or `.venv/bin/pip install -e '.[bench]'`)")
    with contextlib.ExitStack() as stack:
        peers = [] if dynet_missing else [stack.enter_context(DynetPeer(autobatch))
                                          for autobatch in (False, True)]
        per_sample = {workload.key: run_workload(workload, tape, torch, peers, options, notes)
                      for workload in WORKLOADS}
        chain = run_chain(tape, torch, peers, options, notes)
    print_ratios(per_sample, chain)
    print()
    print_notes([f"Tree-LSTM: ms per step is the mean over {models.TREES} different trees (one "
                 "step each); every timed call trains on all of them.",
                 f"The {FOREST}-sample rows are per sample: a timed call trains on all "
                 f"{FOREST} in one graph (the per-sample loop: one step each)."])


if __name__ == "__main__":
    main()
