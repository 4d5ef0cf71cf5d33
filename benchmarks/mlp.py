"""MLP training step (forward + backward + SGD update), float32, in Tape, numpy and PyTorch.

Tape runs twice: the eager loop, and the same model traced into a static program (backward and
SGD updates appended by ``minimize``) run by ``tape.static.Executor`` step after step.

ReLU hidden layers, mean softmax cross-entropy, plain SGD; two sizes:
batch 64 784-256-256-10 and batch 256 1024-1024-1024-10.

    .venv/bin/python benchmarks/mlp.py [--quick] [--cpu-time]

All three start from the same weights; a few steps' losses are compared before timing.
"""
from __future__ import annotations

import itertools

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

SIZES = ((64, (784, 256, 256, 10)), (256, (1024, 1024, 1024, 10)))
LEARNING_RATE = 0.1
TAPE_NEEDS = ("ops.softmax_with_cross_entropy", "ops.mean", "layers.Linear", "optim.SGD",
              "static.Executor")
TAPE_STATIC = "Tape, static (Executor)"


def make_problem(batch: int, widths, seed: int = 0):
    """``(params, x, labels)``: ``params`` = ``[(W (in, out), b (out,))]`` float32, x
    float32 (batch, in), labels int64 (batch,)."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in itertools.pairwise(widths):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        params.append((rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32),
                       rng.uniform(-0.1, 0.1, fan_out).astype(np.float32)))
    x = rng.standard_normal((batch, widths[0])).astype(np.float32)
    labels = rng.integers(0, widths[-1], batch).astype(np.int64)
    return params, x, labels


def numpy_step(params, x, labels, lr: float = LEARNING_RATE):
    """A training step written by hand: the floor (BLAS GEMMs, in-place updates)."""
    params = [(w.copy(), b.copy()) for w, b in params]
    rows = np.arange(len(labels))
    scale = np.float32(lr / len(labels))
    last = len(params) - 1

    def step():
        activations = [x]
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w
            h += b
            if i < last:
                np.maximum(h, 0, out=h)
            activations.append(h)
        probs = h                                   # softmax in place over the logits
        probs -= probs.max(axis=1, keepdims=True)
        np.exp(probs, out=probs)
        probs /= probs.sum(axis=1, keepdims=True)
        loss = -np.log(probs[rows, labels]).mean()
        # d loss / d logits = (probs - onehot) / N; folding the learning rate in here makes
        # every gradient below already the update, since backward is linear in this seed
        delta = probs
        delta[rows, labels] -= 1
        delta *= scale
        for i in range(last, -1, -1):
            w, b = params[i]
            below = activations[i]
            w_update = below.T @ delta
            b_update = delta.sum(axis=0)
            if i > 0:
                delta = delta @ w.T
                np.multiply(delta, below > 0, out=delta)    # ReLU: below is post-activation
            w -= w_update
            b -= b_update
        return loss

    return step


def torch_step(torch, params, x, labels, lr: float = LEARNING_RATE):
    """nn.Linear + ReLU layers, F.cross_entropy, torch.optim.SGD."""
    nn = torch.nn
    layers = []
    for i, (w, b) in enumerate(params):
        linear = nn.Linear(*w.shape)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(w.T.copy()))
            linear.bias.copy_(torch.from_numpy(b))
        layers.append(linear)
        if i < len(params) - 1:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
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


def tape_model(tape, params):
    """``(loss_fn(x, y), trainable parameters)`` of Linear layers holding ``params``."""
    from tape import layers
    model = []
    for i, (w, b) in enumerate(params):
        linear = layers.Linear(*w.shape, act="relu" if i < len(params) - 1 else None)
        for p, value in zip(linear.params(), (w, b)):
            p.value()[...] = value.reshape(p.value().shape)
        model.append(linear)

    def loss_fn(h, y):
        for linear in model:
            h = linear(h)
        return tape.ops.mean(tape.ops.softmax_with_cross_entropy(h, y)[1])
    return loss_fn, [p for linear in model for p in linear.params()]


def tape_step(tape, params, x, labels, lr: float = LEARNING_RATE):
    """The DyNet-style loop of DESIGN.md: reset, forward, loss.backward(), sgd(params)."""
    from tape import optim
    loss_fn, trainable = tape_model(tape, params)
    sgd = optim.SGD(learning_rate=lr)
    label_column = labels.reshape(-1, 1)

    def step():
        tape.reset_global_tape()
        loss = loss_fn(tape.Variable(x), tape.Variable(label_column))
        loss.backward()
        sgd(trainable)
        return loss

    return step


def tape_static_step(tape, params, x, labels, lr: float = LEARNING_RATE):
    """The same model traced once into a program with SGD's backward and updates; each step is
    one ``Executor.run`` with the updates as targets."""
    from tape import optim, static
    loss_fn, _ = tape_model(tape, params)
    label_column = labels.reshape(-1, 1)
    program = static.trace(loss_fn, x, label_column)
    updates = optim.SGD(learning_rate=lr).minimize(program.fetch_names[0], program)
    exe = static.Executor()
    feed = dict(zip(program.feed_names, (x, label_column)))

    def step():
        return exe.run(program, feed, program.fetch_names, targets=updates)[0]

    return step


def loss_value(loss) -> float:
    if hasattr(loss, "value"):              # tape.Variable
        return float(np.asarray(loss.value()).reshape(()))
    if hasattr(loss, "detach"):             # torch.Tensor
        return float(loss.detach())
    return float(loss)


def check_losses(steps: dict, count: int = 3) -> str:
    """Run ``count`` steps of each library from the same start; their losses must agree."""
    losses = {lib: [loss_value(step()) for _ in range(count)] for lib, step in steps.items()}
    reference = losses[NUMPY]
    disagree = [lib for lib, values in losses.items()
                if not np.allclose(values, reference, rtol=1e-4, atol=1e-5)]
    shown = "; ".join(f"{lib} " + ", ".join(f"{v:.5f}" for v in values)
                      for lib, values in losses.items())
    verdict = "agree" if not disagree else f"DISAGREE ({', '.join(disagree)})"
    return f"losses of the first {count} steps {verdict}: {shown}"


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
        makers[TAPE_STATIC] = lambda *a: tape_static_step(tape, *a)

    print("## MLP training step (forward + backward + SGD), float32\n")
    print(threads_report(torch))
    print(clock_note(options))
    checks = []
    for batch, widths in SIZES:
        problem = make_problem(batch, widths)
        checks.append(f"batch {batch} {'-'.join(map(str, widths))}: " + check_losses(
            {lib: make(*problem) for lib, make in makers.items()}))
        steps = {lib: make(*problem) for lib, make in makers.items()}
        with OtherLoad() as load:
            times = {lib: t * 1e3 for lib, t in measure(steps, **options).items()}
        checks.append(f"batch {batch}: {load.note()}")
        rows = [(lib, times.get(lib), notes.get(lib)) for lib in (NUMPY, TORCH, TAPE,
                                                                   TAPE_STATIC)]
        print_table(f"batch {batch}, {'-'.join(map(str, widths))}", "ms per step", rows,
                    digits=3)
    print()
    print_notes(checks)


if __name__ == "__main__":
    main()
