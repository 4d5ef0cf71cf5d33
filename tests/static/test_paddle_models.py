"""Paddle's model zoo, built and saved by Paddle, run by Tape.

One Paddle process (legacy ProgramDesc mode) builds each model of paddle.vision.models and a
few paddle.nn networks at a small input size, in eval mode with random batch-norm statistics,
saves it with ``save_inference_model`` and runs the saved model at two batch sizes. Tape loads
each saved model and its Executor must give Paddle's outputs within 1e-5 of their scale.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from paddle_runner import needs_paddle

import tape.static as static
from tape.registry import REGISTRY

# name: (how Paddle builds it, the input shape past the batch, the input dtype)
MODELS = {
    "lenet": ("vision.models.LeNet(num_classes=10)", [1, 28, 28], "float32"),
    "resnet18": ("vision.models.resnet18(num_classes=10)", [3, 32, 32], "float32"),
    # VGG without its classifier: three dense layers of 25088 x 4096 x 4096 would be the bulk of
    # the test's time and add no op type (matmul, relu, dropout are checked elsewhere)
    "vgg11": ("vision.models.vgg11(num_classes=0)", [3, 32, 32], "float32"),
    "vgg11_bn": ("vision.models.vgg11(batch_norm=True, num_classes=0)", [3, 32, 32], "float32"),
    "squeezenet": ("vision.models.squeezenet1_1(num_classes=10)", [3, 64, 64], "float32"),
    "densenet121": ("vision.models.densenet121(num_classes=10)", [3, 32, 32], "float32"),
    "mobilenet_v1": ("vision.models.mobilenet_v1(scale=0.25, num_classes=10)", [3, 32, 32],
                     "float32"),
    "mobilenet_v2": ("vision.models.mobilenet_v2(scale=0.25, num_classes=10)", [3, 32, 32],
                     "float32"),
    "mobilenet_v3": ("vision.models.mobilenet_v3_small(scale=0.5, num_classes=10)",
                     [3, 32, 32], "float32"),
    "shufflenet_v2": ("vision.models.shufflenet_v2_x0_25(num_classes=10)", [3, 32, 32],
                      "float32"),
    # the rest of paddle.vision.models, each at the smallest input its layers take
    # (AlexNet and GoogLeNet's dense layers fix their input at 224 x 224; AlexNet without its
    # 9216 x 4096 x 4096 classifier, as VGG)
    "alexnet": ("vision.models.alexnet(num_classes=0)", [3, 224, 224], "float32"),
    "googlenet": ("vision.models.googlenet(num_classes=10)", [3, 224, 224], "float32"),
    "inception_v3": ("vision.models.inception_v3(num_classes=10)", [3, 80, 80], "float32"),
    "resnext50_32x4d": ("vision.models.resnext50_32x4d(num_classes=10)", [3, 32, 32],
                        "float32"),
    "vgg16": ("vision.models.vgg16(num_classes=0)", [3, 32, 32], "float32"),
    "squeezenet1_0": ("vision.models.squeezenet1_0(num_classes=10)", [3, 64, 64], "float32"),
    "mobilenet_v3_large": ("vision.models.mobilenet_v3_large(scale=0.5, num_classes=10)",
                           [3, 32, 32], "float32"),
    "shufflenet_v2_swish": ("vision.models.shufflenet_v2_swish(num_classes=10)", [3, 32, 32],
                            "float32"),
    "transformer_encoder": ("nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, "
                            "dropout=0.0), 2)", [6, 16], "float32"),
    "text_classifier": ("TextClassifier()", [7], "int64"),
    "lstm": ("nn.LSTM(8, 12, num_layers=2, direction='bidirect')", [5, 8], "float32"),
    "gru": ("nn.GRU(8, 12)", [5, 8], "float32"),
}
BATCHES = (2, 1)

_SCRIPT = """
    import json, sys, traceback, numpy as np, paddle
    from paddle import nn, vision
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    out_dir, models, batches = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])

    class TextClassifier(nn.Layer):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(50, 16)
            self.conv = nn.Conv1D(16, 8, 3, padding=1)
            self.fc = nn.Linear(8, 4)

        def forward(self, ids):
            h = nn.functional.relu(self.conv(self.embedding(ids).transpose([0, 2, 1])))
            return nn.functional.softmax(self.fc(h.mean(axis=2)))

    def legacy_matmul(x, y, transpose_x=False, transpose_y=False, name=None):
        # paddle.matmul is PIR-only in 3.3.1 ("argument must be Value, but got Variable"): the
        # matmul_v2 op itself, for MultiHeadAttention
        helper = LayerHelper("matmul_v2")
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(type="matmul_v2", inputs={"X": x, "Y": y}, outputs={"Out": out},
                         attrs={"trans_x": transpose_x, "trans_y": transpose_y})
        return out

    paddle.matmul = sys.modules["paddle.tensor"].matmul = legacy_matmul
    exe, report = paddle.static.Executor(paddle.CPUPlace()), {}
    for name, (build, shape, dtype) in models.items():
        try:
            paddle.seed(1)
            rng = np.random.default_rng(3)
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                x = paddle.static.data("x", [-1, *shape], dtype)
                model = eval(build)
                model.eval()
                y = model(x)
                y = y[0] if isinstance(y, (tuple, list)) else y
            exe.run(startup)
            scope = paddle.static.global_scope()
            for v in main.list_vars():     # batch-norm statistics that are not 0 and 1
                if v.persistable and (v.name.endswith("_mean") or v.name.endswith("_variance")):
                    t = scope.find_var(v.name).get_tensor()
                    a = np.array(t)
                    t.set((rng.uniform(0.5, 1.5, a.shape) if v.name.endswith("_variance")
                           else rng.uniform(-0.2, 0.2, a.shape)).astype(a.dtype),
                          paddle.CPUPlace())
            d = f"{out_dir}/{name}"
            paddle.static.save_inference_model(d + "/model", [x], [y], exe,
                                               program=main.clone(for_test=True))
            program, feeds, fetches = paddle.static.load_inference_model(d + "/model", exe)
            for b in batches:
                if dtype == "int64":
                    xb = rng.integers(0, 50, (b, *shape)).astype(dtype)
                else:
                    xb = rng.standard_normal((b, *shape)).astype(dtype)
                out, = exe.run(program, feed={feeds[0]: xb}, fetch_list=fetches)
                np.savez(f"{d}/batch{b}.npz", x=xb, y=out)
            report[name] = "ok"
        except Exception as e:
            report[name] = traceback.format_exc()[-2500:]
    json.dump(report, open(out_dir + "/report.json", "w"))
"""


@pytest.fixture(scope="module")
def paddle_models(tmp_path_factory):
    """The directory of Paddle's saved models, and {model: "ok" or Paddle's error}."""
    d = tmp_path_factory.mktemp("paddle_models")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), str(d),
                           json.dumps(MODELS), json.dumps(BATCHES)], capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ, "FLAGS_enable_pir_api": "0",
                               "GLOG_minloglevel": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    return d, json.loads((d / "report.json").read_text())


@needs_paddle
@pytest.mark.parametrize("name", list(MODELS))
def test_tape_runs_the_model_paddle_saved(paddle_models, name):
    d, report = paddle_models
    assert report[name] == "ok", f"Paddle could not build or save {name}: {report[name]}"
    program = static.load_inference_model(d / name)
    missing = sorted({op.type for op in program.global_block().ops} - set(REGISTRY))
    assert not missing, f"{name}: Tape has no op {missing}"
    for batch in BATCHES:
        saved = np.load(d / name / f"batch{batch}.npz")
        got, = static.Executor().run(program, {program.feed_names[0]: saved["x"]},
                                     program.fetch_names)
        want = saved["y"]
        assert got.shape == want.shape and got.dtype == want.dtype, (batch, got.shape)
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale,
                                   err_msg=f"{name} at batch {batch}")
