"""Small-CNN training step (forward + backward + SGD), float32, in Tape, numpy and PyTorch.

Batch 128 of 1x8x8 images: conv3x3 16 -> relu -> maxpool2 -> conv3x3 32 -> relu -> maxpool2 ->
fc 10, mean softmax cross-entropy, plain SGD. The convolutions pad by 1 ('same'), so the sides
go 8 -> 8 -> 4 -> 4 -> 2 and the fc reads 32*2*2 = 128 features.

    .venv/bin/python benchmarks/cnn.py [--quick] [--cpu-time]

All three start from the same weights; a few steps' losses are compared before timing.
"""
from __future__ import annotations

import numpy as np
from harness import (
    CPU_TIME,
    NUMPY,
    TAPE,
    TORCH,
    OtherLoad,
    clock_note,
    import_tape_or_reason,
    import_torch,
    measure,
    parse_args,
    print_notes,
    print_table,
    threads_report,
    timing_options,
)
from mlp import check_losses

BATCH, SIDE, CLASSES = 128, 8, 10
CHANNELS = (1, 16, 32)
LEARNING_RATE = 0.01
TAPE_NEEDS = ("ops.conv2d", "ops.pool2d", "ops.reshape2", "ops.softmax_with_cross_entropy",
              "layers.Conv2D", "layers.MaxPool2D", "layers.Linear", "optim.SGD")


def make_problem(seed: int = 0):
    """``(params, x, labels)``: conv weights (M, C, 3, 3) and biases, fc weight (128, 10) over
    NCHW-flattened features and bias, all float32; x (N, 1, 8, 8); labels int64 (N,)."""
    rng = np.random.default_rng(seed)
    params = []
    for c, m in zip(CHANNELS, CHANNELS[1:]):
        bound = np.sqrt(6.0 / (c * 9))
        params.append((rng.uniform(-bound, bound, (m, c, 3, 3)).astype(np.float32),
                       rng.uniform(-0.1, 0.1, m).astype(np.float32)))
    features = CHANNELS[-1] * (SIDE // 4) ** 2
    bound = np.sqrt(6.0 / (features + CLASSES))
    params.append((rng.uniform(-bound, bound, (features, CLASSES)).astype(np.float32),
                   rng.uniform(-0.1, 0.1, CLASSES).astype(np.float32)))
    x = rng.standard_normal((BATCH, 1, SIDE, SIDE)).astype(np.float32)
    labels = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    return params, x, labels


def _columns(x):
    """im2col of NHWC ``x`` for a 3x3 'same' convolution: (N * H * W, C * 9), taps in the
    (c, i, j) order of a flattened (M, C, 3, 3) filter."""
    n, h, w, c = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    return windows.reshape(n * h * w, c * 9)


def _columns_back(d_cols, shape):
    """col2im: the NHWC gradient of the input of ``_columns`` from that of its columns."""
    n, h, w, c = shape
    d_cols = d_cols.reshape(n, h, w, c, 3, 3)
    padded = np.zeros((n, h + 2, w + 2, c), d_cols.dtype)
    for i in range(3):
        for j in range(3):
            padded[:, i:i + h, j:j + w] += d_cols[..., i, j]
    return padded[:, 1:-1, 1:-1]


def _max_pool(a):
    """2x2 max pooling of NHWC ``a``, and the mask of each window's maxima."""
    n, h, w, c = a.shape
    windows = a.reshape(n, h // 2, 2, w // 2, 2, c)
    out = windows.max(axis=(2, 4))
    return out, windows == out[:, :, None, :, None]


def numpy_step(params, x, labels, lr: float = LEARNING_RATE):
    """A training step written by hand in numpy: NHWC layout (no transposes around the GEMMs),
    im2col by a strided view, BLAS GEMMs, pooling by reshape, in-place SGD."""
    (w1, b1), (w2, b2), (w3, b3) = [(w.copy(), b.copy()) for w, b in params]
    m1, m2 = w1.reshape(len(w1), -1), w2.reshape(len(w2), -1)   # views: updates reach w1, w2
    pooled_side = SIDE // 4
    # the fc weight's rows reordered from NCHW-flattened (c, h, w) to NHWC-flattened (h, w, c)
    w3 = np.ascontiguousarray(w3.reshape(CHANNELS[-1], pooled_side, pooled_side, CLASSES)
                              .transpose(1, 2, 0, 3).reshape(-1, CLASSES))
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    rows = np.arange(len(labels))
    scale = np.float32(1.0 / len(labels))

    def step():
        n = len(x_nhwc)
        cols1 = _columns(x_nhwc)
        a1 = cols1 @ m1.T
        a1 += b1
        np.maximum(a1, 0, out=a1)
        p1, mask1 = _max_pool(a1.reshape(n, SIDE, SIDE, -1))
        cols2 = _columns(p1)
        a2 = cols2 @ m2.T
        a2 += b2
        np.maximum(a2, 0, out=a2)
        p2, mask2 = _max_pool(a2.reshape(n, SIDE // 2, SIDE // 2, -1))
        features = p2.reshape(n, -1)
        logits = features @ w3
        logits += b3
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        loss = -np.log(probs[rows, labels]).mean()

        d_logits = probs
        d_logits[rows, labels] -= 1
        d_logits *= scale
        d_features = d_logits @ w3.T
        d_w3, d_b3 = features.T @ d_logits, d_logits.sum(axis=0)
        # max-pool backward: the mask routes each window's gradient; a tie between zeros (a
        # window the relu cleared) is stopped by the relu below
        d_a2 = (mask2 * d_features.reshape(p2.shape)[:, :, None, :, None]).reshape(a2.shape)
        d_a2 *= a2 > 0
        d_m2, d_b2 = d_a2.T @ cols2, d_a2.sum(axis=0)
        d_p1 = _columns_back(d_a2 @ m2, p1.shape)
        d_a1 = (mask1 * d_p1[:, :, None, :, None]).reshape(a1.shape)
        d_a1 *= a1 > 0
        d_m1, d_b1 = d_a1.T @ cols1, d_a1.sum(axis=0)
        for p, g in ((m1, d_m1), (b1, d_b1), (m2, d_m2), (b2, d_b2), (w3, d_w3), (b3, d_b3)):
            p -= np.float32(lr) * g
        return loss

    return step


def torch_step(torch, params, x, labels, lr: float = LEARNING_RATE):
    """nn.Conv2d / ReLU / MaxPool2d / Flatten / Linear, F.cross_entropy, torch.optim.SGD."""
    nn = torch.nn
    convs = [nn.Conv2d(c, m, 3, padding=1) for c, m in zip(CHANNELS, CHANNELS[1:])]
    fc = nn.Linear(*params[-1][0].shape)
    with torch.no_grad():
        for module, (w, b) in zip(convs + [fc], params):
            module.weight.copy_(torch.from_numpy(w if module is not fc else w.T.copy()))
            module.bias.copy_(torch.from_numpy(b))
    model = nn.Sequential(convs[0], nn.ReLU(), nn.MaxPool2d(2), convs[1], nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), fc)
    sgd = torch.optim.SGD(model.parameters(), lr=lr)
    tx, tlabels = torch.from_numpy(x), torch.from_numpy(labels)
    cross_entropy = torch.nn.functional.cross_entropy

    def step():
        sgd.zero_grad()
        loss = cross_entropy(model(tx), tlabels)
        loss.backward()
        sgd.step()
        return loss

    return step


def tape_step(tape, params, x, labels, lr: float = LEARNING_RATE):
    """The DyNet-style loop: reset, forward through Conv2D / MaxPool2D / Linear layers,
    loss.backward(), sgd(params)."""
    from tape import layers, optim
    convs = [layers.Conv2D(c, m, 3, padding=1, act="relu")
             for c, m in zip(CHANNELS, CHANNELS[1:])]
    pool = layers.MaxPool2D(2)
    fc = layers.Linear(*params[-1][0].shape)
    for layer, (w, b) in zip(convs + [fc], params):
        layer.w.value()[...] = w
        layer.b.value()[...] = b
    trainable = [p for layer in convs + [fc] for p in layer.params()]
    sgd = optim.SGD(learning_rate=lr)
    label_column = labels.reshape(-1, 1)

    def step():
        tape.reset_global_tape()
        h = tape.Variable(x)
        for conv in convs:
            h = pool(conv(h))
        h = tape.ops.reshape2(h, shape=(0, -1))
        _, loss = tape.ops.softmax_with_cross_entropy(fc(h), tape.Variable(label_column))
        loss = tape.ops.mean(loss)
        loss.backward()
        sgd(trainable)
        return loss

    return step


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv, extra=[CPU_TIME])
    options = timing_options(args.quick, args.cpu_time)
    torch = import_torch()
    tape, tape_missing = import_tape_or_reason(*TAPE_NEEDS)
    notes = {TORCH: None if torch else "torch not importable", TAPE: tape_missing}
    makers = {NUMPY: numpy_step}
    if torch is not None:
        makers[TORCH] = lambda *a: torch_step(torch, *a)
    if tape is not None:
        makers[TAPE] = lambda *a: tape_step(tape, *a)

    print("## Small-CNN training step (forward + backward + SGD), float32\n")
    print(threads_report(torch))
    print(clock_note(options))
    problem = make_problem()
    checks = [check_losses({lib: make(*problem) for lib, make in makers.items()})]
    steps = {lib: make(*problem) for lib, make in makers.items()}
    with OtherLoad() as load:
        times = {lib: t * 1e3 for lib, t in measure(steps, **options).items()}
    checks.append(load.note())
    rows = [(lib, times.get(lib), notes.get(lib)) for lib in (NUMPY, TORCH, TAPE)]
    print_table(f"batch {BATCH}, 1x{SIDE}x{SIDE}: conv3x3 16 (pad 1) -> relu -> maxpool2 -> "
                f"conv3x3 32 (pad 1) -> relu -> maxpool2 -> fc 10", "ms per step", rows,
                digits=3)
    print()
    print_notes(checks)


if __name__ == "__main__":
    main()
