"""Data-parallel training on real MPI ranks: ``mpirun --oversubscribe`` on this machine (loopback
and shared memory), a few launches of worker.py of a few seconds each.

Skipped, saying why, only where Open MPI's mpirun or mpi4py is missing; ``make test`` installs
both (Debian's openmpi-bin and libopenmpi-dev, the ``dist`` extra).
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("worker.py")
LAUNCH_TIMEOUT = 120     # seconds; a launch that takes longer is a hang, and fails the test


def _missing() -> str | None:
    if shutil.which("mpirun") is None:
        return "Open MPI's mpirun is not installed (Debian: openmpi-bin libopenmpi-dev)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install -e '.[dist]')"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def mpirun_command(n: int) -> list:
    """``mpirun`` for ``n`` ranks on this machine, however many cores it has, also as root."""
    command = ["mpirun", "-np", str(n), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    # one node: shared memory between ranks, the loopback interface for mpirun's own wiring
    return command + ["--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo",
                      "--mca", "btl_vader_single_copy_mechanism", "none"]


def launch(n: int, mode: str, results: Path, *args, env=None):
    """Run worker.py ``mode`` on ``n`` ranks: (exit code, {rank: result}, output, seconds)."""
    results.mkdir(parents=True)
    start = time.monotonic()
    run = subprocess.run([*mpirun_command(n), sys.executable, str(WORKER), mode, str(results),
                          *map(str, args)], capture_output=True, text=True,
                         timeout=LAUNCH_TIMEOUT,
                         env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    found = {}
    for path in results.glob("rank-*.json"):
        result = json.loads(path.read_text())
        found[result["rank"]] = result
    return run.returncode, found, run.stdout + run.stderr, time.monotonic() - start


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """2 ranks trained eagerly and statically, a checkpoint written half-way, then the run
    resumed from it on 3 ranks."""
    root = tmp_path_factory.mktemp("dist")
    path = root / "checkpoint" / "checkpoint.npz"
    code, results, output, _ = launch(2, "same", root / "trained", path)
    assert code == 0 and len(results) == 2, output
    resumed = launch(3, "resume", root / "resumed", path)
    return results, path, resumed


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-5)])
def test_two_ranks_with_half_batches_equal_one_process_with_the_whole(trained, mode, dtype,
                                                                      tolerance):
    results, _, _ = trained
    for rank, result in results.items():
        assert result["world_size"] == 2
        assert result[f"{mode}_{dtype}"] <= tolerance, (rank, result)


def test_gradients_travel_in_buckets_and_programs_carry_paddles_collective_ops(trained):
    results, _, _ = trained
    assert results[0]["buckets_float64"] == [3, 1]      # 0.5 kB buckets, last layer first
    # the first bucket (b2, w2, b1) was on its way while backward had w1's gradient to make
    assert results[0]["overlap"] == [1, True] and results[1]["overlap"] == [1, True]
    assert results[0]["static_ops"] == ["c_allreduce_sum", "scale"]


def test_a_gradient_that_only_some_ranks_have_is_averaged_with_zeros_of_the_others(trained):
    results, _, _ = trained
    for result in results.values():
        used, first, unused_has_none = result["partial"]
        assert used <= 1e-15 and first <= 1e-15 and unused_has_none, result


def test_allreduce_and_broadcast_over_two_ranks(trained):
    results, _, _ = trained
    for result in results.values():
        assert result["allreduce"] == [3.0, 1.5]             # ranks hold 1 and 2
        assert result["broadcast_from_last"] == 10.0         # rank 1 holds 10


def test_only_rank_0_writes_the_checkpoint_atomically(trained):
    results, path, _ = trained
    assert [results[r]["wrote_checkpoint"] for r in (0, 1)] == [True, False]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]   # no temporary left


def test_a_run_resumes_on_another_number_of_ranks(trained):
    _, _, (code, results, output, _) = trained
    assert code == 0 and sorted(results) == [0, 1, 2], output
    for result in results.values():
        assert result["resumed_from"] == 3 and result["written_by"] == 0
        assert result["eager_float64"] <= 1e-10, result


@pytest.mark.parametrize("mode, says", [
    ("raise", ["RuntimeError: injected failure on rank 1", "rank 1 of 2 failed, aborting"]),
    ("die", ["signal 9"]),
    ("hang", ["rank 0 of 2: the gradient allreduce of 1 bucket(s) did not complete within 3 s"]),
])
def test_a_failing_rank_ends_the_job_with_a_clear_error(mode, says, tmp_path):
    code, results, output, seconds = launch(2, mode, tmp_path / "results",
                                            env={"TAPE_DIST_TIMEOUT": "3"})
    assert code != 0 and not results, output
    for text in says:
        assert text in output, output
    assert seconds < LAUNCH_TIMEOUT
