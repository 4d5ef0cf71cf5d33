"""Train a small Transformer encoder on scikit-learn's digits read as sequences of pixel rows.

    python examples/transformer_digits.py [--epochs 30] [--d-model 32] [--heads 4] [--lr 0.002]
                                          [--batch 32] [--seed 0]
                                          [--export build/transformer_digits_model]

Each 8x8 image is a sequence of 8 rows of 8 pixels: a Linear embedding of each row plus a
learned position embedding -> 2 TransformerEncoderLayers -> the mean over the sequence -> a
Linear classifier. Trains with Adam and gradient clipping (ClipGradByGlobalNorm) in
examples/digits.py's DyNet-style loop (one ``reset_global_tape()`` per batch,
``loss.backward()``, ``adam(params)``) and prints the held-out accuracy; then, in eval mode,
traces the model into a static program, saves it as a Paddle inference model, reloads it and
compares Tape's Executor (and Paddle's predictor, when paddle is installed) with the eager model,
as digits.py does.
"""
import argparse

import numpy as np
from digits import accuracy, export_and_compare, load, train

import tape
from tape import layers, optim

ROWS = COLS = 8


class DigitTransformer(layers.Layer):
    """(N, 8, 8) images, one row per position -> (N, 10) logits."""

    def __init__(self, d_model: int, heads: int, num_layers: int = 2, dropout: float = 0.1):
        self.embed = layers.Linear(COLS, d_model)
        self.position = self.create_parameter((ROWS, d_model), std=0.1)
        block = layers.TransformerEncoderLayer(d_model, heads, 2 * d_model, dropout=dropout)
        self.encoder = layers.TransformerEncoder(block, num_layers)
        self.classify = layers.Linear(d_model, 10)

    def __call__(self, x):
        h = self.embed(x) + self.position                 # (N, 8, d) + (8, d)
        h = self.encoder(h).mean(axis=1)                  # mean over the rows
        return self.classify(h)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--export", default="build/transformer_digits_model",
                        help="directory for the exported inference model")
    args = parser.parse_args()

    np.random.seed(args.seed)
    tape.seed(args.seed)
    x_train, x_test, y_train, y_test = load(args.seed)
    x_train, x_test = (x.reshape(-1, ROWS, COLS) for x in (x_train, x_test))
    model = DigitTransformer(args.d_model, args.heads)
    adam = optim.Adam(args.lr, grad_clip=optim.ClipGradByGlobalNorm(1.0))
    seconds = train(model, model.params(), x_train, y_train, args, adam)
    model.eval()
    acc = accuracy(model, x_test, y_test)
    print(f"test accuracy: {acc:.4f} ({len(x_test)} held-out digits, {seconds:.1f} s training)")
    export_and_compare(model, x_test, y_test, args.export, tape.CPUPlace())


if __name__ == "__main__":
    main()
