"""Real PaddlePaddle for the static tests: Paddle's scripts in a fresh interpreter, and its
inference predictor serving what Tape saves (``needs_paddle`` skips where it is not installed)."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

HAS_PADDLE = importlib.util.find_spec("paddle") is not None
needs_paddle = pytest.mark.skipif(not HAS_PADDLE, reason="paddlepaddle is not installed")


def run_paddle(script: str, *args) -> None:
    """Run ``script`` in a fresh interpreter with Paddle in legacy (ProgramDesc) mode."""
    env = {**os.environ, "FLAGS_enable_pir_api": "0", "GLOG_minloglevel": "3"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def paddle_predict(dirname, x: np.ndarray) -> np.ndarray:
    """The first output of Paddle's inference predictor on the model saved in ``dirname``
    (model.pdmodel + model.pdiparams), fed ``x`` as its first input."""
    np.savez(dirname / "feeds.npz", x)
    paddle_serve([dirname])
    report = json.loads((dirname / "paddle.json").read_text())
    assert report["default"] == "ok", report["default"]
    return np.load(dirname / "default.npz")["arr_0"]


# Paddle's predictor as users get it (IR passes and oneDNN kernels on), without oneDNN, and
# without IR passes
PREDICTOR_MODES = {"default": {}, "no_onednn": {"onednn": False},
                   "no_ir_optim": {"ir_optim": False, "onednn": False}}

_SERVE = """
    import faulthandler, json, os, sys, traceback
    import numpy as np
    import paddle.inference as pi

    def serve(d, ir_optim=True, onednn=True):
        config = pi.Config(d + "/model.pdmodel", d + "/model.pdiparams")
        config.disable_gpu()
        config.disable_glog_info()
        config.switch_ir_optim(ir_optim)
        if not onednn:
            config.disable_mkldnn()
        predictor = pi.create_predictor(config)
        feeds = np.load(d + "/feeds.npz")
        for name, key in zip(predictor.get_input_names(), feeds.files):
            predictor.get_input_handle(name).copy_from_cpu(feeds[key])
        predictor.run()
        return [predictor.get_output_handle(n).copy_to_cpu()
                for n in predictor.get_output_names()]

    modes, hang = json.loads(sys.argv[2]), int(sys.argv[3])
    for d in json.load(open(sys.argv[1])):
        path = d + "/paddle.json"
        report = json.load(open(path)) if os.path.exists(path) else {}
        for mode, options in modes.items():
            if mode in report:   # set before a try: the process died in it
                continue
            report[mode] = "crashed or hung: the process died"
            json.dump(report, open(path, "w"))
            faulthandler.dump_traceback_later(hang, exit=True)
            try:
                np.savez(d + f"/{mode}.npz", *serve(d, **options))
                report[mode] = "ok"
            except Exception as e:
                report[mode] = "".join(traceback.format_exception_only(e))[-1500:]
            faulthandler.cancel_dump_traceback_later()
            json.dump(report, open(path, "w"))
"""


def paddle_serve(dirs, modes=("default",), hang_seconds: int = 20) -> None:
    """Serve each model saved in ``dirs`` with Paddle's inference predictor in each of
    ``modes`` (PREDICTOR_MODES), all in one process: fed the arrays of ``feeds.npz`` in input
    order, it writes ``<mode>.npz`` (the outputs, in order) and ``paddle.json`` ({mode: "ok" or
    the error}) beside the model. A model that crashes or hangs the process is reported so,
    and a new process goes on with the rest."""
    reports = [pathlib.Path(d) / "paddle.json" for d in dirs]
    for r in reports:
        r.unlink(missing_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([str(d) for d in dirs], f)
    tried = 0
    try:
        while True:
            try:
                run_paddle(_SERVE, f.name, json.dumps({m: PREDICTOR_MODES[m] for m in modes}),
                           hang_seconds)
                return
            except AssertionError:   # a model killed the process (its report says so)...
                before, tried = tried, sum(len(json.loads(r.read_text())) for r in reports
                                           if r.exists())
                if tried == before:
                    raise            # ...or the process died before trying one more
    finally:
        os.unlink(f.name)
