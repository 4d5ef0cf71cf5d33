"""Paddle's inference predictor serves every exportable registered op as Tape computes it.

Each forward op that can appear in an inference model gets cases drawn from its registered
``case`` (fixed seeds, float inputs in float32, ``is_test`` set as the export sets it). Each
case is traced into a one-op program (its first input fed, the others persistable constants)
and saved with ``save_inference_model`` into a directory of its own; Tape's Executor runs the
reloaded model, and one Paddle process serves them all through ``paddle.inference`` in each of
its PREDICTOR_MODES. Every output must match Tape's eager output (float32 within a few ulp of
the output's scale, ints and bools exactly), but where PADDLE_BUGS says Paddle is wrong. A
newly registered op is picked up without touching this file.

The batch size stays free: in the cases of ANOTHER_BATCH_SEEDS, where the op takes the fed
input with one more row along its first (batch) axis (its shape rule accepts it: no other input
or attribute is tied to that size), the same saved model is also run at that batch, in Tape's
Executor and in Paddle, and must match the eager op on it.
"""
import json
import shutil

import numpy as np
import pytest
from paddle_runner import PREDICTOR_MODES, needs_paddle, paddle_serve
from paddle_serving_cases import (
    ANOTHER_BATCH_SEEDS,
    EXPORT_FIXES,
    IN_PLACE,
    MORE_SEEDS,
    PADDLE_BUGS,
    SEEDS,
    SKIP,
)

import tape.static as static
from tape import dtypes
from tape.errors import TapeError
from tape.registry import REGISTRY
from tape.tape import get_global_tape
from tape.testing import Draw, run_op
from tape.variable import Variable

ULPS = 16   # float32 tolerance, in units of eps at the output's scale
EPS32 = float(np.finfo(np.float32).eps)
UNFETCHABLE = {dtypes.INT16: dtypes.INT32}   # copy_to_cpu cannot hand these out; cast first


def _float32(a):
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype == np.float64 else a


def _case(op_type, seed):
    """(inputs, attrs) of ``op_type``'s case for ``seed``: float64 arrays made float32, every
    attribute given, ``is_test`` set as the export sets it."""
    info = REGISTRY[op_type]
    inputs, attrs = info.case(Draw.from_seed(seed))
    inputs = {s: [_float32(a) for a in v] if isinstance(v, (list, tuple)) else _float32(v)
              for s, v in inputs.items()}
    attrs = dict(info.check_attrs(attrs))   # every attribute, defaults filled
    if attrs.get("in_dtype") == dtypes.FP64:   # cast: its input is now float32
        attrs["in_dtype"] = dtypes.FP32
    if "is_test" in info.attrs:
        attrs["is_test"] = True
    return inputs, attrs


def _fed(info, arrays):
    """(slot, index) of the input to feed: the first numeric one, else the first; or None."""
    given = [(s, i, a) for s in info.input_names for i, a in enumerate(arrays.get(s, ()))]
    numeric = [g for g in given if g[2].dtype != np.bool_] or given
    return numeric[0][:2] if numeric else None


def _widened(v):
    """``v``, cast to a dtype Paddle's predictor can hand out if it cannot."""
    wide = UNFETCHABLE.get(v.desc.dtype)
    return v if wide is None else get_global_tape().run(
        REGISTRY["cast"], {"X": [v]}, {"in_dtype": v.desc.dtype, "out_dtype": wide})["Out"][0]


def _widened_array(a):
    wide = UNFETCHABLE.get(dtypes.from_numpy(a.dtype))
    return a if wide is None else a.astype(dtypes.to_numpy(wide))


def one_op_program(op_type, arrays, attrs, fed, output=lambda v: v):
    """The case as a traced one-op program: the input at ``fed`` (slot, index) fed, the other
    ``arrays`` ({slot: [array]}) constants. They are the arrays themselves, so that afterwards
    they hold the program's values (batch norm's running statistics, updated in place by the
    trace). ``output`` maps each output Variable (tests/onnx uses this too)."""
    info = REGISTRY[op_type]

    def one_op(*feed):
        variables = {s: [Variable(a) for a in v] for s, v in arrays.items()}
        if fed is not None:
            variables[fed[0]][fed[1]] = feed[0]
        in_place = {out: variables[slot] for out, slot in IN_PLACE.get(op_type, {}).items()}
        outs = get_global_tape().run(info, variables, attrs, in_place or None)
        return [output(v) for s in info.visible_outputs for v in outs.get(s, [])]

    example = [arrays[fed[0]][fed[1]]] if fed is not None else []
    return static.trace(one_op, *example)


def _export(op_type, seed, d):
    """Save the case's one-op model in directory ``d``, with the fed array, Tape's eager
    outputs and what Tape's Executor computes with the reloaded model; for a case of
    ANOTHER_BATCH_SEEDS whose op takes its fed input one row longer, the same in
    ``d/BATCH_DIR`` at that batch."""
    info = REGISTRY[op_type]
    inputs, attrs = _case(op_type, seed)
    arrays = {s: v if isinstance(v, list) else [v] for s, v in inputs.items()}
    fed = _fed(info, arrays)
    example = [arrays[fed[0]][fed[1]]] if fed is not None else []
    static.save_inference_model(d, one_op_program(op_type, arrays, attrs, fed, _widened))
    _run_saved(op_type, d, inputs, attrs, example)
    other = _another_batch(op_type, inputs, attrs, fed) if seed in ANOTHER_BATCH_SEEDS else None
    if other is not None:
        shutil.copytree(d, d / BATCH_DIR, ignore=shutil.ignore_patterns("*.npz"))
        _run_saved(op_type, d / BATCH_DIR, other, attrs, [_slot_arrays(other[fed[0]])[fed[1]]])


def _slot_arrays(v):
    return v if isinstance(v, list) else [v]


def _run_saved(op_type, d, inputs, attrs, example):
    """Beside the model in ``d``: the feeds, what Tape's Executor computes with the reloaded
    model, and Tape's eager outputs on ``inputs``."""
    info = REGISTRY[op_type]
    loaded = static.load_inference_model(d)
    np.savez(d / "feeds.npz", *example)
    np.savez(d / "tape.npz", *static.Executor().run(loaded, dict(zip(loaded.feed_names, example)),
                                                    loaded.fetch_names))
    outs = run_op(op_type, _copied(inputs), attrs)
    np.savez(d / "expected.npz", *(_widened_array(v.numpy()) for s in info.visible_outputs
                                   for v in outs.get(s, [])))


BATCH_DIR = "another_batch"


def _another_batch(op_type, inputs, attrs, fed):
    """``inputs`` with the fed array one row longer along its first axis, if the op takes them
    eagerly; else None (the fed input is 0-D, or the op ties its first axis to another input or
    an attribute)."""
    if fed is None or _slot_arrays(inputs[fed[0]])[fed[1]].ndim == 0:
        return None
    arrays = list(_slot_arrays(inputs[fed[0]]))
    x = arrays[fed[1]]
    # a new row between the first and the last (floats: no tie with a row the case made
    # distinct), or a copy of the last (ints, bools: values the case allows)
    row = (x[:1] * 0.75 + x[-1:] * 0.25).astype(x.dtype) if x.dtype.kind == "f" else x[-1:]
    arrays[fed[1]] = np.concatenate([x, row], axis=0)
    other = {**inputs, fed[0]: arrays if isinstance(inputs[fed[0]], list) else arrays[0]}
    try:
        run_op(op_type, _copied(other), attrs)
    except TapeError:
        return None
    return other


def _copied(inputs):
    """Copies of the input arrays: an op updating one in place (batch_norm's Mean) must not
    change the case for the runs after."""
    return {s: [a.copy() for a in v] if isinstance(v, list) else v.copy()
            for s, v in inputs.items()}


CASES = [(t, s) for t in sorted(REGISTRY) if REGISTRY[t].case is not None and t not in SKIP
         for s in [*SEEDS, *MORE_SEEDS.get(t, ())]]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """{(op, seed): its directory, or why the export failed}; every directory served."""
    root = tmp_path_factory.mktemp("served")
    results = {}
    for op_type, seed in CASES:
        d = root / f"{op_type}-{seed}"
        try:
            _export(op_type, seed, d)
            results[op_type, seed] = d
        except Exception as e:
            results[op_type, seed] = f"the export failed: {type(e).__name__}: {e}"
    dirs = [d for d in results.values() if not isinstance(d, str)]
    paddle_serve(dirs + [d / BATCH_DIR for d in dirs if (d / BATCH_DIR).exists()],
                 PREDICTOR_MODES)
    return results


def _in_order(op_type, attrs, outputs):
    """top_k_v2 with sorted=False leaves the order to the kernel: compare in sorted order."""
    if op_type != "top_k_v2" or attrs["sorted"] or not outputs[0].ndim:
        return outputs
    order = np.argsort(outputs[0], axis=attrs["axis"], kind="stable")
    return [np.take_along_axis(o, order, axis=attrs["axis"]) for o in outputs]


def _problem(got, expected):
    """What differs between the outputs ``got`` and Tape's eager ``expected``, or None."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, Tape has {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        if (g.dtype, g.shape) != (e.dtype, e.shape):
            return f"output {i} is {g.dtype} {g.shape}, Tape's is {e.dtype} {e.shape}"
        scale = max(1.0, float(np.nanmax(np.abs(e), initial=0))) if e.dtype.kind == "f" else 0
        try:
            np.testing.assert_allclose(g, e, rtol=ULPS * EPS32 if scale else 0,
                                       atol=ULPS * EPS32 * scale, err_msg=f"output {i}")
        except AssertionError as error:
            return str(error)
    return None


def _outcome(served, op_type, seed, another_batch=False):
    """({"tape" or a Paddle mode: what is wrong with its outputs, or None}, {mode: reason} of
    the PADDLE_BUGS the case may hit); at the case's batch size or, ``another_batch``, at one
    more row (None when the op ties its batch size)."""
    d = served[op_type, seed]
    assert not isinstance(d, str), f"{op_type}: {d}"
    inputs, attrs = _case(op_type, seed)
    if another_batch:
        if not (d / BATCH_DIR).exists():
            return None     # not one of ANOTHER_BATCH_SEEDS, or the op ties its batch size
        d, inputs = d / BATCH_DIR, _another_batch(op_type, inputs, attrs,
                                                  _fed(REGISTRY[op_type], {
                                                      s: _slot_arrays(v)
                                                      for s, v in inputs.items()}))
    report = {"tape": "ok", **json.loads((d / "paddle.json").read_text())}

    def outputs(name):
        arrays = np.load(d / f"{name}.npz")
        return _in_order(op_type, attrs, [arrays[k] for k in arrays.files])

    expected = outputs("expected")
    problems = {mode: _problem(outputs(mode), expected) if report.get(mode) == "ok" else
                report.get(mode, "not run") for mode in ["tape", *PREDICTOR_MODES]}
    bugs = {mode: reason for op, modes, hits, reason in PADDLE_BUGS
            if op == op_type and hits(inputs, attrs) for mode in modes}
    return problems, bugs


def _judge(op_type, outcome):
    """Fail on a wrong output; xfail where only listed Paddle bugs show."""
    problems, bugs = outcome
    wrong = {mode: p for mode, p in problems.items() if p is not None and mode not in bugs}
    assert not wrong, f"{op_type}: " + "\n".join(f"{m}: {p}" for m, p in wrong.items())
    shown = sorted(mode for mode in bugs if problems[mode] is not None)
    if shown:
        pytest.xfail(f"{op_type}: Paddle's bug in {shown}: {bugs[shown[0]]}")


@needs_paddle
@pytest.mark.parametrize("op_type,seed", CASES)
def test_paddle_serves_op(served, op_type, seed):
    _judge(op_type, _outcome(served, op_type, seed))


@needs_paddle
@pytest.mark.parametrize("op_type,seed", [(t, s) for t, s in CASES if s in ANOTHER_BATCH_SEEDS])
def test_paddle_serves_op_at_another_batch(served, op_type, seed):
    outcome = _outcome(served, op_type, seed, another_batch=True)
    if outcome is None:
        pytest.skip(f"{op_type}: seed {seed}'s case ties its first axis to another input or an "
                    f"attribute")
    _judge(op_type, outcome)


@needs_paddle
def test_most_cases_run_at_another_batch(served):
    """The second batch size is not a check that skips everything: most cases take it."""
    tried = [(t, s) for t, s in CASES if s in ANOTHER_BATCH_SEEDS]
    taken = sum((served[c] / BATCH_DIR).exists() for c in tried if not isinstance(served[c], str))
    assert taken >= len(tried) // 2, f"only {taken} of {len(tried)} cases ran at another batch"


@needs_paddle
def test_every_listed_paddle_bug_shows(served):
    """A PADDLE_BUGS entry that no case shows any more (Paddle fixed, or the case changed) must
    go."""
    shown = set()
    for op_type, seed in CASES:
        problems, bugs = _outcome(served, op_type, seed)
        shown.update((op_type, reason, mode) for mode, reason in bugs.items()
                     if problems[mode] is not None)
    stale = [(op, mode, reason) for op, modes, _, reason in PADDLE_BUGS for mode in modes
             if (op, reason, mode) not in shown]
    assert not stale, f"listed Paddle bugs that no case shows: {stale}"


def test_every_export_fix_has_a_case():
    missing = [(op, what) for op, hits, what in EXPORT_FIXES
               if not any(t == op and hits(*_case(t, s)) for t, s in CASES)]
    assert not missing, f"export fixes that no case exercises (add a seed to MORE_SEEDS): " \
                        f"{missing}"
