"""Train a small CNN on scikit-learn's bundled digits (1x8x8 images) with a DyNet-style loop.

    python examples/cnn_digits.py [--epochs 15] [--lr 0.05] [--batch 32] [--seed 0]

conv3x3 16 (pad 1) -> relu -> maxpool2 -> conv3x3 32 (pad 1) -> relu -> maxpool2 -> flatten ->
fc 10; the data split and scaling are examples/digits.py's. One ``reset_global_tape()`` per
iteration, ``loss.backward()``, ``sgd(params)``; prints the held-out test accuracy at the end.
"""
import argparse

import numpy as np
from digits import accuracy, load, train

import tape
from tape import layers


class SmallCNN(layers.Layer):
    """(N, 1, 8, 8) images -> (N, 10) logits."""

    def __init__(self):
        self.conv1 = layers.Conv2D(1, 16, 3, padding=1, act="relu")
        self.conv2 = layers.Conv2D(16, 32, 3, padding=1, act="relu")
        self.pool = layers.MaxPool2D(2)
        self.fc = layers.Linear(32 * 2 * 2, 10)

    def __call__(self, x):
        h = self.pool(self.conv2(self.pool(self.conv1(x))))
        return self.fc(h.flatten(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    np.random.seed(args.seed)
    tape.seed(args.seed)
    x_train, x_test, y_train, y_test = load(args.seed)
    x_train, x_test = (x.reshape(-1, 1, 8, 8) for x in (x_train, x_test))
    model = SmallCNN()
    seconds = train(model, model.params(), x_train, y_train, args)
    acc = accuracy(model, x_test, y_test)
    print(f"test accuracy: {acc:.4f} ({len(x_test)} held-out digits, {seconds:.1f} s training)")


if __name__ == "__main__":
    main()
