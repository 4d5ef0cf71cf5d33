"""Train an MLP on scikit-learn's bundled digits (8x8 images) with a DyNet-style loop.

    python examples/digits.py [--epochs 40] [--hidden 128] [--lr 0.05] [--batch 32] [--seed 0]

One ``reset_global_tape()`` per iteration, ``loss.backward()``, ``sgd(params)``; prints the
held-out test accuracy at the end.
"""
import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import tape
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
        logits = model(tape.Variable(x)).value()
    return float(np.mean(np.argmax(logits, axis=1) == y[:, 0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    np.random.seed(args.seed)
    tape.seed(args.seed)
    x_train, x_test, y_train, y_test = load(args.seed)
    l1 = layers.Linear(64, args.hidden, act="relu")
    l2 = layers.Linear(args.hidden, 10)

    def model(x):
        return l2(l1(x))

    params = l1.params() + l2.params()
    sgd = optim.SGD(learning_rate=args.lr)

    start = time.perf_counter()
    steps = args.epochs * int(np.ceil(len(x_train) / args.batch))
    bar = tqdm(total=steps, desc="training", unit="step")
    for epoch in range(args.epochs):
        order = np.random.permutation(len(x_train))
        for i in range(0, len(order), args.batch):
            idx = order[i:i + args.batch]
            tape.reset_global_tape()
            x, y = tape.Variable(x_train[idx]), tape.Variable(y_train[idx])
            _, loss = tape.ops.softmax_with_cross_entropy(model(x), y)
            loss = tape.ops.mean(loss)
            loss.backward()
            sgd(params)
            bar.update()
        bar.set_postfix(epoch=epoch + 1, loss=f"{float(loss.value()):.4f}")
    bar.close()
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_test, y_test)
    print(f"test accuracy: {acc:.4f} ({len(x_test)} held-out digits, {seconds:.1f} s training)")


if __name__ == "__main__":
    main()
