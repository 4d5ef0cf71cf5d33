"""Train an MLP on scikit-learn's bundled digits (8x8 images), export it, reload it, compare.

    python examples/digits.py [--epochs 40] [--hidden 128] [--lr 0.05] [--batch 32] [--seed 0]
                              [--export build/digits_model] [--place cpu|cuda]
    mpirun -np 4 python examples/digits.py --distributed

Trains with a DyNet-style loop (one ``reset_global_tape()`` per iteration, ``loss.backward()``,
``sgd(params)``) and prints the held-out test accuracy; then traces the model into a static
program, saves it as a Paddle inference model (model.pdmodel + model.pdiparams), loads it back,
runs it with Tape's Executor — and with PaddlePaddle's own predictor when paddle is installed —
and prints how far their predictions are from the eager model's; then exports it to ONNX
(model.onnx beside them) and prints how far onnxruntime's predictions are. ``--place cuda``
trains on the GPU (``pip install -e '.[cuda]'``): the same loop, with new Variables and
parameters on ``tape.CUDAPlace()``. ``--distributed``, under ``mpirun``, trains data-parallel:
each rank on its shard of every epoch, with ``--batch`` split over the ranks; rank 0 reports
and exports.
"""
import argparse
import subprocess
import sys
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import tape
from tape import functional as F
from tape import layers, optim


def load(seed):
    digits = load_digits()
    y = digits.target.astype(np.int64).reshape(-1, 1)
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, y, test_size=0.25, random_state=seed, stratify=digits.target)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1.0   # pixel-wise, from train only
    return [((x - mean) / std).astype(np.float32) for x in (x_train, x_test)] + [y_train, y_test]


def accuracy(model, x, y):
    with tape.no_grad():
        logits = np.asarray(model(tape.Variable(x)))     # on the host, wherever it ran
    return float(np.mean(np.argmax(logits, axis=1) == y[:, 0]))


def train(model, params, x_train, y_train, args, optimizer=None) -> float:
    """The DyNet-style loop: per batch, a fresh tape, forward, ``loss.backward()``, a step of
    ``optimizer`` (default: SGD at ``args.lr``). Returns the seconds it took."""
    opt = optim.SGD(learning_rate=args.lr) if optimizer is None else optimizer
    start = time.perf_counter()
    steps = args.epochs * int(np.ceil(len(x_train) / args.batch))
    bar = tqdm(total=steps, desc="training", unit="step")
    for epoch in range(args.epochs):
        order = np.random.permutation(len(x_train))
        for i in range(0, len(order), args.batch):
            idx = order[i:i + args.batch]
            tape.reset_global_tape()
            loss = F.cross_entropy(model(tape.Variable(x_train[idx])), y_train[idx])
            loss.backward()
            opt(params)
            bar.update()
        bar.set_postfix(epoch=epoch + 1, loss=f"{float(loss.value()):.4f}")
    bar.close()
    return time.perf_counter() - start


def train_distributed(model, params, x_train, y_train, args) -> float:
    """``--distributed`` (under ``mpirun -np N``): every rank trains on its shard of each epoch
    with ``args.batch / N`` examples per step; DataParallel starts the ranks from rank 0's
    parameters and averages their gradients, so they end with the same model. Returns the
    seconds it took."""
    from tape import distributed
    distributed.init()
    rank, world = distributed.rank(), distributed.world_size()
    distributed.DataParallel(params)
    opt = optim.SGD(learning_rate=args.lr)
    per_rank = max(1, args.batch // world)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        mine = distributed.shard(len(x_train), rank, world, seed=args.seed, epoch=epoch)
        for i in range(0, len(mine), per_rank):
            idx = mine[i:i + per_rank]
            tape.reset_global_tape()
            loss = F.cross_entropy(model(tape.Variable(x_train[idx])), y_train[idx])
            loss.backward()
            opt(params)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--export", default="build/digits_model",
                        help="directory for the exported inference model")
    parser.add_argument("--place", choices=["cpu", "cuda"], default="cpu",
                        help="train on the CPU or on the first CUDA GPU")
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel over the ranks of mpirun (tape.distributed)")
    args = parser.parse_args()
    place = tape.CUDAPlace(0) if args.place == "cuda" else tape.CPUPlace()
    try:
        tape.set_default_place(place)   # fails at once where the place cannot run
    except tape.PreconditionNotMetError as e:
        sys.exit(f"digits.py --place {args.place}: {e}")

    np.random.seed(args.seed)
    tape.seed(args.seed)
    x_train, x_test, y_train, y_test = load(args.seed)
    l1 = layers.Linear(64, args.hidden, act="relu")
    l2 = layers.Linear(args.hidden, 10)

    def model(x):
        return l2(l1(x))

    if args.distributed:
        seconds = train_distributed(model, l1.params() + l2.params(), x_train, y_train, args)
        if tape.distributed.rank() != 0:
            return
    else:
        seconds = train(model, l1.params() + l2.params(), x_train, y_train, args)
    acc = accuracy(model, x_test, y_test)
    print(f"test accuracy: {acc:.4f} ({len(x_test)} held-out digits, {seconds:.1f} s training "
          f"on {place})")
    export_and_compare(model, x_test, y_test, args.export, place)
    onnx_compare(model, x_test, y_test, f"{args.export}/model.onnx")


def export_and_compare(model, x_test, y_test, dirname, place):
    """Trace -> save_inference_model -> load_inference_model -> Executor on ``place`` (and
    Paddle's predictor on the CPU)."""
    with tape.no_grad():
        eager = np.asarray(model(tape.Variable(x_test)))
    program = tape.static.trace(model, x_test[:1])
    model_path, params_path = tape.static.save_inference_model(dirname, program)
    loaded = tape.static.load_inference_model(dirname)
    (static,) = tape.static.Executor(place).run(loaded, feed={loaded.feed_names[0]: x_test},
                                          fetch_list=loaded.fetch_names)
    static_acc = float(np.mean(np.argmax(static, axis=1) == y_test[:, 0]))
    print(f"exported {model_path} + {params_path}; reloaded and run by tape.static.Executor: "
          f"max |difference| {np.max(np.abs(static - eager)):.2e}, accuracy {static_acc:.4f}")
    paddle = paddle_predictions(dirname, x_test)
    if paddle is None:
        print("PaddlePaddle is not installed: skipped running the model in paddle.inference")
    else:
        paddle_acc = float(np.mean(np.argmax(paddle, axis=1) == y_test[:, 0]))
        print(f"run by PaddlePaddle's paddle.inference predictor: max |difference| "
              f"{np.max(np.abs(paddle - eager)):.2e}, accuracy {paddle_acc:.4f}")


def onnx_compare(model, x_test, y_test, path):
    """Export the model to ONNX and run it with onnxruntime (the ``onnx`` extra)."""
    try:
        import onnxruntime

        import tape.onnx
    except ImportError:
        print("onnx / onnxruntime are not installed: skipped the ONNX export")
        return
    tape.onnx.export(model, path, input_spec=[x_test[:1]])
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (served,) = session.run(None, {session.get_inputs()[0].name: x_test})
    with tape.no_grad():
        eager = np.asarray(model(tape.Variable(x_test)))
    served_acc = float(np.mean(np.argmax(served, axis=1) == y_test[:, 0]))
    print(f"exported {path}; run by onnxruntime: max |difference| "
          f"{np.max(np.abs(served - eager)):.2e}, accuracy {served_acc:.4f}")


_PADDLE_PREDICT = """
import sys, numpy as np, paddle.inference as pi
config = pi.Config(sys.argv[1] + "/model.pdmodel", sys.argv[1] + "/model.pdiparams")
config.disable_glog_info()
predictor = pi.create_predictor(config)
feed = predictor.get_input_handle(predictor.get_input_names()[0])
feed.copy_from_cpu(np.load(sys.argv[2]))
predictor.run()
np.save(sys.argv[2], predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu())
"""


def paddle_predictions(dirname, x):
    """The model's outputs from Paddle's own predictor, or None when paddle is not installed.
    It runs in a child process: importing paddle takes seconds and fills stderr with logs."""
    try:
        import importlib.util
        if importlib.util.find_spec("paddle") is None:
            return None
    except ValueError:
        return None
    data = f"{dirname}/input.npy"
    np.save(data, x)
    subprocess.run([sys.executable, "-c", _PADDLE_PREDICT, dirname, data], check=True,
                   capture_output=True)
    return np.load(data)


if __name__ == "__main__":
    main()
