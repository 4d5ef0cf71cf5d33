"""onnxruntime serves every exportable op's generic cases as Tape computes them.

The cases are the ones tests/static/test_paddle_serves_ops.py draws from each op's registered
``case`` (fixed seeds, float inputs in float32, ``is_test`` set as an inference export sets it).
Each is traced into a one-op program (its first numeric input fed, the others constants),
exported with ``tape.onnx.to_onnx`` (which runs ``onnx.checker``), and run by onnxruntime on the
CPU at the drawn batch size and at a larger one; every output must match Tape's eager output:
float32 within 1e-5 of the output's scale (max(1, max |output|)), ints and bools exactly.

An op that static export supports but that has no ONNX mapping fails
``test_every_exportable_op_has_an_onnx_mapping`` by name; add its converter in tape/onnx/ops/.

``python tests/onnx/test_onnx_ops.py`` prints the largest difference over all cases.
"""
import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "static"))
from test_paddle_serves_ops import CASES, _case, _fed, one_op_program  # noqa: E402

from tape.errors import TapeError  # noqa: E402
from tape.onnx import CONVERTERS, DEFAULT_OPSET, to_onnx  # noqa: E402
from tape.registry import REGISTRY  # noqa: E402
from tape.testing import run_op  # noqa: E402

TOLERANCE = 1e-5             # of the output's scale, max(1, max |output|)
OTHER_OPSETS = (13, 18, 21)   # besides the default, each op's first cases
OTHER_OPSET_SEEDS = (0, 1, 2)


def _eager(op_type, arrays, attrs):
    info = REGISTRY[op_type]
    inputs = {s: [a.copy() for a in v] if info.inputs[info.input_names.index(s)].duplicable
              else v[0].copy() for s, v in arrays.items()}
    outs = run_op(op_type, inputs, attrs)
    return [v.numpy() for s in info.visible_outputs for v in outs.get(s, [])]


def _larger_batch(x):
    """``x`` with its first axis longer by 2 (rows repeated), or None if it has none to grow."""
    if x.ndim == 0 or x.shape[0] == 0:
        return None
    return np.concatenate([x, x[:1], x[-1:]])


def _difference(got, expected) -> float:
    """The largest difference of float outputs relative to their scale; ints and bools must be
    equal (else inf). Shapes and dtypes must agree."""
    assert len(got) == len(expected), f"{len(got)} outputs, Tape has {len(expected)}"
    worst = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        assert (g.dtype, g.shape) == (e.dtype, e.shape), \
            f"output {i} is {g.dtype} {g.shape}, Tape's is {e.dtype} {e.shape}"
        if e.dtype.kind != "f":
            if not np.array_equal(g, e):
                return float("inf")
            continue
        same_nan = np.isnan(g) == np.isnan(e)
        assert same_nan.all(), f"output {i}: NaN where Tape has none, or the other way"
        same_inf = (g == e) | np.isnan(e)
        finite = ~same_inf
        scale = max(1.0, float(np.max(np.abs(e[np.isfinite(e)]), initial=0)))
        if finite.any():
            worst = max(worst, float(np.max(np.abs(g[finite] - e[finite]))) / scale)
    return worst


def measure(op_type, seed, opset=DEFAULT_OPSET) -> list:
    """[(batch size, difference)] of the case's ONNX model run by onnxruntime vs Tape's eager
    output, at the drawn batch size and, where the case's program holds at it, a larger one."""
    info = REGISTRY[op_type]
    inputs, attrs = _case(op_type, seed)
    arrays = {s: list(v) if isinstance(v, (list, tuple)) else [v] for s, v in inputs.items()}
    fed = _fed(info, arrays)
    program = one_op_program(op_type, arrays, attrs, fed)
    expected = _eager(op_type, arrays, attrs)
    model = to_onnx(program, opset_version=opset)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = [i.name for i in session.get_inputs()]
    x = arrays[fed[0]][fed[1]] if fed is not None else None
    results = [(None if x is None or x.ndim == 0 else x.shape[0],
                _difference(session.run(None, dict(zip(feeds, [x] if x is not None else []))),
                            expected))]
    bigger = _larger_batch(x) if x is not None else None
    if bigger is None:
        return results
    grown = {s: list(v) for s, v in arrays.items()}
    grown[fed[0]][fed[1]] = bigger
    try:
        expected = _eager(op_type, grown, attrs)
    except TapeError:    # the case's other inputs fix the batch size
        return results
    declared = [program.global_block().vars[n].shape for n in program.fetch_names]
    if any(len(d) != e.ndim or any(n not in (-1, m) for n, m in zip(d, e.shape))
           for d, e in zip(declared, expected)):
        return results   # the program was traced for the drawn batch (a squeezed batch axis)
    got = session.run(None, {feeds[0]: bigger})
    return results + [(bigger.shape[0], _difference(got, expected))]


def _check(op_type, seed, opset):
    for batch, difference in measure(op_type, seed, opset):
        assert difference <= TOLERANCE, \
            f"{op_type} (seed {seed}, opset {opset}, batch {batch}): onnxruntime differs " \
            f"from Tape by {difference:.3g} of the output's scale"


def test_every_exportable_op_has_an_onnx_mapping():
    missing = sorted({op for op, _ in CASES} - set(CONVERTERS))
    assert not missing, f"ops that static export supports but that have no ONNX mapping " \
                        f"(add a converter in tape/onnx/ops/): {missing}"


@pytest.mark.parametrize("op_type,seed", CASES)
def test_onnxruntime_serves_op(op_type, seed):
    _check(op_type, seed, DEFAULT_OPSET)


@pytest.mark.parametrize("opset", OTHER_OPSETS)
@pytest.mark.parametrize("op_type", sorted({op for op, _ in CASES}))
def test_onnxruntime_serves_op_at_other_opsets(op_type, opset):
    for seed in OTHER_OPSET_SEEDS:
        _check(op_type, seed, opset)


if __name__ == "__main__":
    worst, two_batches = {}, 0
    for op_type, seed in CASES:
        results = measure(op_type, seed)
        two_batches += len(results) == 2
        for batch, difference in results:
            if difference > worst.get(op_type, (-1,))[0]:
                worst[op_type] = (difference, seed, batch)
    for op_type, (difference, seed, batch) in sorted(worst.items(), key=lambda kv: -kv[1][0]):
        print(f"{op_type:28s} {difference:.3g} (seed {seed}, batch {batch})")
    print(f"{len(worst)} ops, {len(CASES)} cases ({two_batches} also at a larger batch); largest "
          f"difference {max(d for d, _, _ in worst.values()):.3g} of the output's scale")
