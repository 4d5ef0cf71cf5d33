"""benchmarks/dynamic.py's models compute what they claim: the hand-batched char LM is the 16
separate sequences' loss, and DyNet's versions (when dynet38 is installed) give eager Tape's
losses and gradients, with autobatching off and on."""
import pathlib
import re
import sys
import time

import numpy as np
import pytest

import tape
import tape.layers  # noqa: F401  (the benchmark's models use tape.layers)
import tape.optim  # noqa: F401

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
try:
    import dynamic
    import dynamic_models as models
    import harness
    import lazy_steps
    import per_op
    from dynet_peer import DynetPeer, dynet_installed
finally:
    sys.path.pop(0)


def eager_loss_and_gradients(model, samples, learning_rate=models.LEARNING_RATE):
    """``(params, loss, gradients)`` of ``model``'s first step on fresh parameters (seed 0)."""
    tape.seed(0)
    params, losses = model(tape, samples)
    loss, gradients = dynamic.tape_training(tape, params, losses, learning_rate)[1]()
    return params, loss, gradients


def test_hand_batched_lm_is_the_16_separate_sequences():
    samples = models.char_batch_samples(np.random.default_rng(3))
    params, separate_loss, separate = eager_loss_and_gradients(models.char_lm_16_tape, samples)
    batch_params, batch_loss, batched = eager_loss_and_gradients(models.char_lm_batch_tape,
                                                                 samples)
    for p, q in zip(params, batch_params, strict=True):    # the same initial parameters
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    np.testing.assert_allclose(batch_loss, separate_loss, rtol=1e-6)
    for p, a, e in zip(params, batched, separate, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * np.abs(e).max(), err_msg=p.name)


def test_each_sequences_loss_as_a_function_is_the_plain_lm_recorded_as_one_op_each():
    """``char_lm_16_sequence_tape`` (the row "each sequence's loss as tape.function", workload
    lm_16_seq): the plain 16-sequence LM's loss bit for bit and its gradients within float32
    rounding, eagerly and lazily; lazily, one op per sequence, then the sum and its scale."""
    samples = models.char_batch_samples(np.random.default_rng(6))[:3]
    params, loss, gradients = eager_loss_and_gradients(models.char_lm_16_tape, samples)
    for lazy in (False, True):
        tape.seed(0)
        own_params, losses = models.char_lm_16_sequence_tape(tape, samples)
        for p, q in zip(params, own_params, strict=True):     # the same initial parameters
            np.testing.assert_array_equal(p.numpy(), q.numpy())
        first = dynamic.tape_training(tape, own_params, losses, models.LEARNING_RATE,
                                      lazy=lazy)[1]
        own_loss, own_gradients = first()
        assert own_loss == loss
        for p, a, e in zip(params, own_gradients, gradients, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * np.abs(e).max(),
                                       err_msg=p.name)
    with tape.lazy():
        tape.reset_global_tape()
        losses[0]()
        recorded = [op.plan.info.type for op in tape.get_global_tape()]
    assert len({*recorded[:3]}) == 1 and recorded[0].startswith("function_loss_")
    assert recorded[3:] == ["sum", "scale"]


def test_the_hand_batch_is_step_major():
    """Row t*16 + k of the batch is sequence k's character t (a transposed layout would mix
    sequences into one another's steps and still give 16 rows per step)."""
    samples = [np.arange(k * 100, k * 100 + models.CHAR_LENGTH + 1) for k in range(16)]
    ((inputs, targets),) = models._char_steps(samples, batched=True)
    assert inputs[3 * 16 + 5] == samples[5][3] and targets[3 * 16 + 5] == samples[5][4]


def test_measure_asks_a_self_timing_callable():
    """A peer in another process times its own calls: measure reports its figure."""
    class Remote:
        calls = 0

        def __call__(self):
            Remote.calls += 1

        def seconds_per_call(self, number, clock):
            assert clock is time.process_time
            return 0.25

    assert harness.measure({"peer": Remote()}, repeats=3, target=0.01, warmup=1, settle=0,
                           clock=time.process_time) == {"peer": 0.25}
    assert Remote.calls == 1          # the warm-up; calibration and repeats asked the peer


needs_dynet = pytest.mark.skipif(not dynet_installed(),
                                 reason="dynet38 is not installed (an optional peer)")


@pytest.fixture(scope="module", params=[False, True], ids=["autobatch_off", "autobatch_on"])
def peer(request):
    with DynetPeer(request.param) as peer:
        yield peer


def small_trees(rng, count):
    return [(models.random_tree(rng, int(rng.integers(1, 6))), int(rng.integers(5)))
            for _ in range(count)]


DYNET_CASES = {     # DyNet model: (Tape model, samples)
    "tree_lstm": (models.tree_lstm_tape, small_trees(np.random.default_rng(1), 2)),
    "forest": (models.forest_tape, small_trees(np.random.default_rng(2), 5)),
    "char_lm": (models.char_lm_tape, models.char_samples(np.random.default_rng(3))),
    "char_lm_16": (models.char_lm_16_tape,
                   models.char_batch_samples(np.random.default_rng(4))[:3]),
    "char_lm_batch": (models.char_lm_batch_tape,
                      models.char_batch_samples(np.random.default_rng(5))[:4]),
}


@needs_dynet
@pytest.mark.parametrize("model", sorted(DYNET_CASES))
def test_dynet_models_compute_tapes_loss_and_gradients(peer, model):
    tape_model, samples = DYNET_CASES[model]
    params, loss, gradients = eager_loss_and_gradients(tape_model, samples)
    dynet_loss, dynet_gradients = peer.build(model, [p.numpy() for p in params], samples,
                                             models.LEARNING_RATE)
    np.testing.assert_allclose(dynet_loss, loss, rtol=1e-6)
    assert len(dynet_gradients) == len(params)
    for p, a, e in zip(params, dynet_gradients, gradients, strict=True):
        assert a.shape == e.shape, p.name
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 * np.abs(e).max(), err_msg=p.name)
    peer.steps()()              # a training step runs in the peer


@needs_dynet
def test_dynet_chain_is_per_ops_chain(peer):
    chain = per_op.tape_functions(tape)[0]
    total, (gradient,) = peer.build("chain", [per_op.x_np], [], None)
    np.testing.assert_allclose(total, chain().item(), rtol=1e-6)
    np.testing.assert_allclose(gradient, np.full(per_op.SIZE, 1.0001 ** 50), rtol=1e-5)


@needs_dynet
def test_a_failing_peer_request_is_raised_with_the_peers_traceback(peer):
    with pytest.raises(RuntimeError, match="KeyError: 'no_such_model'"):
        peer.build("no_such_model", [], [], None)


def test_without_dynet_the_benchmark_says_so_and_skips_its_rows(monkeypatch, capsys):
    def no_peer(autobatch):
        raise AssertionError("a DyNet peer was started although dynet is not installed")
    tree = next(w for w in dynamic.WORKLOADS if w.key == "tree")
    monkeypatch.setattr(dynamic, "WORKLOADS",
                        (tree._replace(samples=lambda rng: small_trees(rng, 1)),))
    monkeypatch.setattr(dynamic, "dynet_installed", lambda: False)
    monkeypatch.setattr(dynamic, "DynetPeer", no_peer)
    monkeypatch.setattr(dynamic, "import_torch", lambda: None)
    # each step runs once; the figures are not what this test is about
    monkeypatch.setattr(dynamic, "measure", lambda fns, **options: {
        name: (fn(), 1e-3)[1] for name, fn in fns.items()})
    before = tape.get_flags(["FLAGS_lazy_fusion"])
    tape.set_flags({"FLAGS_lazy_fusion": False})   # no fused loop to compile for one call
    try:
        dynamic.main(["--quick"])
    finally:
        tape.set_flags(before)
    out = capsys.readouterr().out
    assert "note: dynet not installed, its rows are skipped" in out
    assert "| DyNet, autobatching off | — (dynet not installed) |" in out
    assert "| DyNet, autobatching on | — (dynet not installed) |" in out
    assert "| Tape, lazy, recorded only (nothing computed) | " in out


def test_lazy_steps_splits_a_step_into_record_execute_and_sgd(capsys):
    """benchmarks/lazy_steps.py prints one line per workload with the minimum and median CPU
    time of each phase of a lazy step."""
    lazy_steps.main(["lm_batch", "--steps", "1"])
    line = capsys.readouterr().out.strip()
    figures = [float(f) for f in re.findall(r"(\d+\.\d+)", line)]
    assert line.startswith("lm_batch: 37 ops; ms per step") and len(figures) == 6
    assert all(f >= 0 for f in figures) and figures[1] > 0     # (recording takes time)


def test_lazy_steps_splits_execute_into_kernels_and_the_rest_and_prints_the_budget(capsys):
    """With --kernels, execute = kernels (under batching.invoke) + the rest, and the LM's
    0.9x budget per op beyond the hand batch's; --floor times the leanest recording."""
    lazy_steps.main(["lm_batch", "lm_16_fn", "--steps", "2", "--kernels", "--floor"])
    lines = capsys.readouterr().out.strip().splitlines()
    for which, ops in (("lm_batch", 37), ("lm_16_fn", 594)):
        line = next(line for line in lines if line.startswith(f"{which}: {ops} ops;"))
        record, _, execute, _, sgd, _, kernels, _, rest, _ = map(
            float, re.findall(r"(\d+\.\d+)", line))
        assert kernels > 0 and rest > 0 and kernels + rest <= execute + 0.02   # (rounding)
    budget = next(line for line in lines if line.startswith("lm_16_fn at 0.9x"))
    assert "the 557 ops it has beyond the hand batch's 37 may cost" in budget
    assert next(line for line in lines if line.startswith("floor: lm_16's 594 ops"))


def test_lazy_steps_lm_16_seq_records_one_op_per_sequence_and_gets_the_ratio_lines(capsys):
    """Workload lm_16_seq: 16 calls of each sequence's loss, their sum and its scale; with
    lm_batch in the run, its ratio line and, with --kernels, its budget line, which says
    nothing per op beyond the hand batch's (it records fewer)."""
    lazy_steps.main(["lm_batch", "lm_16_seq", "--steps", "1", "--kernels"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert next(line for line in lines if line.startswith("lm_16_seq: 18 ops; ms per step"))
    assert next(line for line in lines if line.startswith(
        "lm_16_seq vs lm_batch: ") and "x the hand batch's throughput; " in line)
    budget = next(line for line in lines if line.startswith("lm_16_seq at 0.9x: a step of"))
    assert re.search(r"the hand batch's own take \d+\.\d\d$", budget)


def test_lazy_steps_ratio_and_budget_lines_read_the_figures_they_name(capsys):
    """``_ratios``' lines from given minima (ms): record, execute, SGD, kernels, the rest and
    ops of the hand batch; record, execute, SGD, kernels and ops of ``which``."""
    hand = (np.array([0.2, 5.0, 0.1]), 4.0, 1.2, 37)
    lazy_steps._ratios("lm_16_seq", hand, (np.array([0.1, 34.0, 0.1]), 33.0, None, 18), True)
    lazy_steps._ratios("lm_16_fn", hand, (np.array([1.5, 5.8, 0.1]), 4.2, None, 594), True)
    assert capsys.readouterr().out.splitlines() == [
        "lm_16_seq vs lm_batch: 0.15x the hand batch's throughput; 1.02x if executing cost "
        "what the hand batch's does",      # 5.3 / 34.2; 5.3 / (5.3 + 0.1 - 0.2)
        "lm_16_seq at 0.9x: a step of at most 5.89 ms; its kernels and SGD take 33.10, leaving "
        "-27.21 ms for recording and execution bookkeeping (today 0.10 + 1.00); the hand "
        "batch's own take 1.40",
        "lm_16_fn vs lm_batch: 0.72x the hand batch's throughput; 0.80x if executing cost "
        "what the hand batch's does",      # 5.3 / 7.4; 5.3 / (5.3 + 1.5 - 0.2)
        "lm_16_fn at 0.9x: a step of at most 5.89 ms; its kernels and SGD take 4.30, leaving "
        "1.59 ms for recording and execution bookkeeping (today 1.50 + 1.60); the hand "
        "batch's own take 1.40, so the 557 ops it has beyond the hand batch's 37 may cost "
        "0.34 us each, recorded, run and freed"]     # (5.89 - 4.3 - 1.4) / 557 ms


def test_the_lm_target_ratio_is_against_the_hand_batch_timed_alongside(monkeypatch, capsys):
    lm_16 = next(w for w in dynamic.WORKLOADS if w.key == "lm_16")
    monkeypatch.setattr(dynamic, "WORKLOADS", (lm_16._replace(
        samples=lambda rng: models.char_batch_samples(rng)[:2]),))
    monkeypatch.setattr(dynamic, "dynet_installed", lambda: False)
    monkeypatch.setattr(dynamic, "import_torch", lambda: None)
    monkeypatch.setattr(dynamic, "run_chain", lambda *args: {})
    timed = {}

    def measure(fns, **options):      # each step once; the hand batch "takes" half as long
        timed.update(fns)
        return {name: (fn(), 0.5e-3 if name == dynamic.HAND_ALONGSIDE else 1e-3)[1]
                for name, fn in fns.items()}
    monkeypatch.setattr(dynamic, "measure", measure)
    dynamic.main(["--quick"])
    out = capsys.readouterr().out
    own = (dynamic.TAPE_LAZY_TRACED, dynamic.TAPE_LAZY_SEQUENCE, dynamic.HAND_ALONGSIDE)
    assert {dynamic.TAPE_LAZY, *own} <= set(timed)
    for lib in own:
        assert f"{lib}: gradients agree with eager Tape's on the first step" in out
    rows = [line.split(" | ")[0][2:] for line in out.splitlines() if line.startswith("| Tape")]
    assert rows[:5] == [dynamic.TAPE, dynamic.TAPE_LAZY, *own]
    ratios = [line for line in out.splitlines()
              if "separate sequences per graph vs Tape, lazy's hand-batched 16" in line]
    assert ratios == [f"| {lib}, 16 separate sequences per graph vs Tape, lazy's hand-batched 16 "
                      "(timed alongside) | 0.50× | at least 0.9× |"
                      for lib in (dynamic.TAPE_LAZY_TRACED, dynamic.TAPE_LAZY,
                                  dynamic.TAPE_LAZY_SEQUENCE)]
