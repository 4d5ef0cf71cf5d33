"""DyNet as a benchmark peer, in a child process per autobatching setting.

DyNet chooses autobatching once, when it is imported (``dynet_config.set(autobatch=...)``),
so one benchmark run times it off and on in two child processes. ``DynetPeer`` (the parent
side) starts one running this file, sends it a model (``dynet_models.MODELS``), Tape's initial
parameters and the samples, and gets back the first step's loss and gradients; its steps then
run in the child, which times them itself, so ``harness.measure`` alternates them with the
other libraries' without counting the pipe.

The child reads one JSON request a line on stdin and answers one JSON line on the stdout it was
started with (DyNet's own messages go to stderr). Arrays travel as ``.npz`` files in a
temporary folder, read with ``allow_pickle=False``.

    python benchmarks/dynet_peer.py --autobatch 0|1     (started by DynetPeer, not by hand)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

DYNET = "DyNet"
MEMORY_MB = 512                 # DyNet's default pool size; it grows as a graph needs
CLOCKS = {clock.__name__: clock for clock in (time.perf_counter, time.process_time)}


def dynet_installed() -> bool:
    return importlib.util.find_spec("dynet") is not None


def peer_name(autobatch: bool) -> str:
    return f"{DYNET}, autobatching {'on' if autobatch else 'off'}"


def to_plain(samples):
    """``samples`` as JSON: tuples and arrays become lists, numpy ints plain ints."""
    if isinstance(samples, tuple | list):
        return [to_plain(s) for s in samples]
    if isinstance(samples, np.ndarray):
        return samples.tolist()
    return int(samples)


class DynetPeer:
    """One DyNet child process with autobatching ``autobatch`` (on or off)."""

    def __init__(self, autobatch: bool):
        self.name = peer_name(autobatch)
        self._folder = tempfile.TemporaryDirectory(prefix="dynet_peer_")
        self._log = open(Path(self._folder.name) / "stderr.txt", "w+")  # noqa: SIM115
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--autobatch", str(int(autobatch))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self.pid = self._process.pid

    def _ask(self, **request):
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            self._log.seek(0)
            raise RuntimeError(f"{self.name}: the peer process ended "
                               f"(exit {self._process.wait()}): {self._log.read()[-2000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{self.name}, {request['op']}: {answer['error']}")
        return answer

    def build(self, model: str, params, samples, learning_rate):
        """Build ``model`` from Tape's ``params`` (arrays) on ``samples``; ``(loss,
        gradients)`` of its first step, gradients in Tape's layout and order."""
        folder = Path(self._folder.name)
        np.savez(folder / "params.npz", *[np.asarray(p) for p in params])
        answer = self._ask(op="build", model=model, params=str(folder / "params.npz"),
                           samples=to_plain(samples), learning_rate=learning_rate,
                           gradients=str(folder / "gradients.npz"))
        with np.load(folder / "gradients.npz", allow_pickle=False) as saved:
            gradients = [saved[f"arr_{k}"] for k in range(len(saved.files))]
        return answer["loss"], gradients

    def steps(self, name: str = "step") -> RemoteSteps:
        return RemoteSteps(self, name)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self._process.stdin.close()
            self._process.wait()
        self._log.close()
        self._folder.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RemoteSteps:
    """A step of the peer's current model as a zero-argument callable; ``seconds_per_call(n)``
    times ``n`` calls inside the peer (``harness.measure`` uses it)."""

    def __init__(self, peer: DynetPeer, name: str):
        self._peer, self._name = peer, name

    def __call__(self):
        self._peer._ask(op="run", step=self._name, number=1, clock="perf_counter")

    def seconds_per_call(self, number: int, clock=time.perf_counter) -> float:
        """Seconds per call on ``clock`` (``time.perf_counter`` or ``time.process_time``, read
        in the peer)."""
        return self._peer._ask(op="run", step=self._name, number=number,
                               clock=clock.__name__)["seconds"] / number


# --- the child -----------------------------------------------------------------------------

def serve(autobatch: int) -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                       # DyNet's C++ prints (to stdout) go to stderr
    import dynet_config
    dynet_config.set(mem=str(MEMORY_MB), random_seed=1, autobatch=autobatch)
    from dynet_models import MODELS
    steps = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "quit":
                break
            if request["op"] == "build":
                with np.load(request["params"], allow_pickle=False) as saved:
                    params = [saved[f"arr_{k}"] for k in range(len(saved.files))]
                steps, first = MODELS[request["model"]](params, request["samples"],
                                                         request["learning_rate"])
                loss, gradients = first()
                np.savez(request["gradients"], *gradients)
                answer = {"loss": float(loss)}
            else:
                step, clock = steps[request["step"]], CLOCKS[request["clock"]]
                start = clock()
                for _ in range(request["number"]):
                    step()
                answer = {"seconds": clock() - start}
        except Exception:                   # the parent raises it, with this traceback
            answer = {"error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--autobatch", type=int, choices=(0, 1), required=True)
    serve(parser.parse_args().autobatch)
