"""Peak memory of one forward + backward of a deep MLP: Tape, PyTorch, numpy by hand, lower bound.

    .venv/bin/python benchmarks/memory.py [--quick]

The model: 32 Linear layers of 1024 units, each followed by ReLU, batch 256, float32; the loss is
the mean of the last layer's output; the input needs no gradient. Each library runs in a fresh
process (this script re-runs itself with ``--child``), which imports it, runs one forward +
backward of a one-layer model of the same width (so imports, numba compilation and the BLAS
buffers are not counted), builds the model and the input, then resets the kernel's peak-RSS
counter (writes 5 to /proc/self/clear_refs), reads VmRSS, runs the first forward + backward of
the deep model and reads the peak (VmHWM, from /proc/self/status). The figure is peak minus
that RSS: what one forward + backward costs above the model itself; memory freed while the
model was built is first handed back to the system (malloc_trim), so it cannot hide the cost.
Each figure is the median of three processes. Linux only. A further process per library (not
torch, whose allocator tracemalloc does not see) measures the peak of live numpy arrays alone.

The lower bound is analytic: stepping through backward, the ReLU outputs it has still to read,
the parameter gradients made so far, and the inputs and outputs of the grad op running (an
activation gradient in, another out; a layer's weight gradient is written while the
activation gradient below it is). ``numpy (by hand)`` is what a library can aim at: ReLU in
place, each activation freed once backward has used it.
"""
from __future__ import annotations

import ctypes
import gc
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
from harness import (
    NUMPY,
    TAPE,
    TORCH,
    import_tape_or_reason,
    import_torch,
    parse_args,
    print_notes,
    print_table,
)

MIB = 1 << 20
BOUND = "lower bound"
DEPTH, WIDTH, BATCH = 32, 1024, 256


def lower_bound(depth: int, width: int, batch: int, itemsize: int = 4) -> int:
    """Bytes live at the worst moment of backward (above the parameters and the input)."""
    act = batch * width * itemsize
    param_grad = (width * width + width) * itemsize
    peak = depth * act + act            # every ReLU output, and the loss's gradient
    grads = 0
    for i in range(depth, 0, -1):       # layer i; i - 1 ReLU outputs below it
        peak = max(peak, i * act + 2 * act + grads)        # relu_grad: dA_i -> dZ_i
        grads += param_grad
        below = act if i > 1 else 0                         # the input wants no gradient
        peak = max(peak, (i - 1) * act + act + grads + below)   # mul_grad: dZ_i -> dW_i, dA_i-1
    return peak


def make_params(depth: int, width: int, seed: int = 0) -> list:
    """``[(W (in, out), b (out,))]`` float32, Xavier-uniform weights, small biases."""
    rng = np.random.default_rng(seed)
    bound = np.sqrt(6.0 / (2 * width))
    return [(rng.uniform(-bound, bound, (width, width)).astype(np.float32),
             rng.uniform(-0.1, 0.1, width).astype(np.float32)) for _ in range(depth)]


def numpy_model(params: list):
    """Forward + backward by hand; returns ``run(x) -> [dW, db, ...]``."""
    def run(x):
        activations = []
        h = x
        for w, b in params:
            h = h @ w
            h += b
            np.maximum(h, 0, out=h)
            activations.append(h)
        del h
        grad = np.full(activations[-1].shape, 1.0 / activations[-1].size, np.float32)
        grads = []
        for i in range(len(params) - 1, -1, -1):
            out = activations.pop()
            np.multiply(grad, out > 0, out=grad)        # through the ReLU, in place
            del out
            below = activations[-1] if activations else x
            grads += [below.T @ grad, grad.sum(axis=0)]
            grad = grad @ params[i][0].T if i else None
        return grads
    return run


def torch_model(torch, params: list):
    nn = torch.nn
    layers = []
    for w, b in params:
        linear = nn.Linear(*w.shape)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(w.T.copy()))
            linear.bias.copy_(torch.from_numpy(b))
        layers += [linear, nn.ReLU()]
    model = nn.Sequential(*layers)

    def run(x):
        model(torch.from_numpy(x)).mean().backward()
        return [p.grad for p in model.parameters()]
    return run


def tape_model(tape, params: list):
    from tape import layers
    model = []
    for w, b in params:
        linear = layers.Linear(*w.shape, act="relu")
        linear.w.value()[...] = w
        linear.b.value()[...] = b
        model.append(linear)

    def loss(x):
        h = tape.Variable(x)
        for linear in model:
            h = linear(h)
        return tape.ops.mean(h)

    def run(x):
        tape.reset_global_tape()
        loss(x).backward()      # as for torch: no activation held outside the tape
        return [p.grad for linear in model for p in linear.params()]
    return run


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"/proc/self/status has no {field}")


def _release_free_memory() -> None:
    """Give the memory freed while building the model back to the system (glibc's malloc_trim),
    so that the forward + backward cannot hide in it."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def child(lib: str, depth: int, mode: str) -> dict:
    """In a fresh process: warm up, build, then the peak of the first deep forward + backward:
    of the RSS (``mode="rss"``), or of the bytes numpy allocates, as tracemalloc traces them
    (``mode="traced"``; torch does not report its allocations there)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    if lib == TORCH:
        import torch
        make = lambda params: torch_model(torch, params)  # noqa: E731
    elif lib == TAPE:
        import tape
        make = lambda params: tape_model(tape, params)  # noqa: E731
    else:
        make = numpy_model
    make(make_params(1, WIDTH, seed=1))(x)
    run = make(make_params(depth, WIDTH))
    _release_free_memory()
    if mode == "traced":
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        run(x)
        return {"peak": tracemalloc.get_traced_memory()[1] - base}
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status_bytes("VmRSS")
    grads = run(x)
    peak = _status_bytes("VmHWM")
    checksum = float(sum(np.asarray(g).astype(np.float64).sum() for g in grads))
    return {"peak": peak - base, "model_rss": base, "checksum": checksum}


def run_child(lib: str, depth: int, mode: str = "rss") -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", lib, str(depth), mode],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{lib} child failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.splitlines()[-1])


def _median_run(runs: list) -> dict:
    """The run whose peak is the median of ``runs`` (an odd number of them)."""
    return sorted(runs, key=lambda r: r["peak"])[len(runs) // 2]


def main(argv=None):
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
        return
    args = parse_args(__doc__.splitlines()[0], argv)
    depth, repeats = (8, 1) if args.quick else (DEPTH, 3)
    if not os.path.exists("/proc/self/clear_refs"):
        print("memory.py needs Linux (/proc/self/clear_refs and /proc/self/status)")
        return
    _, tape_missing = import_tape_or_reason("layers.Linear", "ops.mean")
    missing = {TORCH: None if import_torch() else "torch not importable", TAPE: tape_missing}
    libs = [lib for lib in (NUMPY, TORCH, TAPE) if missing.get(lib) is None]
    results = {lib: _median_run([run_child(lib, depth) for _ in range(repeats)])
               for lib in libs}
    traced = {lib: run_child(lib, depth, "traced")["peak"] for lib in libs if lib != TORCH}
    bound = lower_bound(depth, WIDTH, BATCH)

    rows = [(BOUND, bound / MIB, "analytic")]
    for lib in (NUMPY, TORCH, TAPE):
        if lib in results:
            rows.append((lib, results[lib]["peak"] / MIB, "by hand" if lib == NUMPY else None))
        else:
            rows.append((lib, None, missing[lib]))
    print("## Peak memory of one forward + backward (fresh process each)\n")
    print(f"MLP: {depth} x (Linear {WIDTH} -> {WIDTH}, ReLU), batch {BATCH}, float32; "
          f"loss = mean of the output; parameters {depth * (WIDTH + 1) * WIDTH * 4 / MIB:.1f} "
          f"MiB")
    print_table("peak RSS above the RSS after the model exists", "MiB", rows,
                baselines=(BOUND, TORCH), digits=1)
    print()
    checksums = {lib: r["checksum"] for lib, r in results.items()}
    agree = np.allclose(list(checksums.values()), checksums[NUMPY], rtol=1e-3)
    print_notes([
        f"peak: VmHWM after resetting it (echo 5 > /proc/self/clear_refs), minus VmRSS then; "
        f"the median of {repeats} process(es) per library",
        "live numpy arrays at the peak (tracemalloc, separate runs): "
        + ", ".join(f"{lib} {peak / MIB:.2f} MiB" for lib, peak in traced.items())
        + f"; lower bound {bound / MIB:.2f} MiB. The rest of an RSS figure is the allocator's "
          "(freed blocks glibc keeps for reuse, page rounding)",
        "RSS after the model exists: " + ", ".join(
            f"{lib} {r['model_rss'] / MIB:.0f} MiB" for lib, r in results.items()),
        "sum of all gradients " + ("agrees" if agree else "DISAGREES") + ": " + ", ".join(
            f"{lib} {c:.6g}" for lib, c in checksums.items()),
    ])


if __name__ == "__main__":
    main()
