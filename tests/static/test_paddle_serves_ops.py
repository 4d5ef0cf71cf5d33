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

import tape.static as static
from tape import dtypes
from tape.errors import TapeError
from tape.geometry import align_shapes, interp_output_size, interp_ratio
from tape.registry import REGISTRY
from tape.tape import get_global_tape
from tape.testing import Draw, run_op
from tape.variable import Variable

SEEDS = range(16)
ANOTHER_BATCH_SEEDS = range(8)    # the cases also served one row longer (time: half of them)
MORE_SEEDS = {   # cases past SEEDS that show a listed Paddle bug or an export fix
    "elementwise_add": [23], "matmul_v2": [42], "pool2d": [50], "split": [38],
    "prelu": [16, 21, 23, 24, 30, 35, 41], "cumsum": [36, 47],
    "conv2d_transpose": [32],
    **{op: [19] for op in ("equal", "not_equal", "less_than", "less_equal", "greater_than",
                           "greater_equal")},
}

SKIP = {   # ops that cannot appear in an inference model, or cannot be checked this way
    **{op: "optimizer op: updates parameters in training programs" for op in (
        "adagrad", "rmsprop", "adadelta", "adamax", "lamb")},
    "adam": "optimizer op: updates parameters in training programs",
    "adamw": "optimizer op: updates parameters in training programs",
    "momentum": "optimizer op: updates parameters in training programs",
    "sgd": "optimizer op: updates parameters in training programs",
    "feed": "the export adds its own feed ops",
    "fetch": "the export adds its own fetch ops",
    "save_combine": "checkpoint i/o: writes a file, no output to compare",
    "load_combine": "checkpoint i/o: reads the file its case names",
    "uniform_random": "random: Paddle's generator is not Tape's",
    "gaussian_random": "random: Paddle's generator is not Tape's",
    **{op: "collective op: needs a communicator, which a single-process predictor has not "
           "(tests/distributed runs it on 2 ranks)" for op in (
               "c_allreduce_sum", "c_identity", "c_broadcast")},
    "fill_zeros_like": "a backward helper: Paddle 3.3.1 does not register it for inference "
                       "('Operator (fill_zeros_like) is not registered')",
}

# Outputs that Paddle's op requires to be its inputs themselves (Paddle: "Mean and MeanOut
# should share the same memory"), as layers.BatchNorm passes them.
IN_PLACE = {"batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance"}}


def _negative_axes(ins, a):
    return np.any(np.asarray(a["axes"] if "axes" in a else a["axis"]) < 0)


def _start_before(ins, a, batch):
    """A slice start before the beginning of a known axis (or, ``batch``, of axis 0, the fed
    input's unknown batch axis)."""
    x = ins["Input"]
    return any((axis % x.ndim == 0) == batch and start < -x.shape[axis]
               for axis, start in zip(a["axes"], a["starts"]))


def _inferred_section(ins, a, batch):
    """A -1 among several split sections, on axis 0 (``batch``) or on a known axis."""
    sections = a["sections"]
    return -1 in sections and len(sections) > 1 and (a["axis"] % ins["X"].ndim == 0) == batch


def _adaptive_with_padding(ins, a):
    return (a["adaptive"] or a["global_pooling"]) and \
        (any(a["paddings"]) or a["ceil_mode"] or a["padding_algorithm"] == "SAME")


# What the export changes for Paddle's predictor (tape/static/export_rules.py): (op, the cases it
# changes, what). Every entry must have a case among CASES; those cases are served right.
EXPORT_FIXES = [
    ("split", _negative_axes, "a negative axis, counted from the start"),
    ("slice", _negative_axes, "negative axes, counted from the start"),
    ("transpose2", _negative_axes, "negative axes, counted from the start"),
    ("slice", lambda ins, a: _start_before(ins, a, False), "a start before -dim, made 0"),
    ("split", lambda ins, a: _inferred_section(ins, a, False), "a -1 section, resolved"),
    ("matmul_v2", lambda ins, a: a["trans_x"] and ins["X"].ndim == 1 or
     a["trans_y"] and ins["Y"].ndim == 1, "trans_x / trans_y of a 1-D operand, cleared"),
    ("batch_norm", lambda ins, a: a["trainable_statistics"] and not a["use_global_stats"],
     "batch statistics need the ReserveSpace output, declared"),
    ("pool2d", _adaptive_with_padding, "adaptive pooling's paddings and ceil_mode, neutral"),
    ("elementwise_add", lambda ins, a: a["axis"] == max(ins["X"].ndim, ins["Y"].ndim),
     "the axis of a 0-D operand, -1"),
    ("fill_constant", lambda ins, a: not ins, "a model without feeds keeps its feed holder"),
    ("layer_norm", lambda ins, a: a["epsilon"] == 1e-3, "epsilon 1e-3, read back as float32"),
]


def _compare_axis_off_the_end(ins, a):
    """The comparison's axis places the shorter input elsewhere than at the trailing dims."""
    x, y = ins["X"].shape, ins["Y"].shape
    return align_shapes(x, y, a["axis"]) != align_shapes(x, y, -1)


def _avg_over_trailing_padding(ins, a):
    """Non-exclusive average pooling whose windows may reach past the image's end."""
    p = a["paddings"]
    asymmetric = len(p) == 4 and (p[0] != p[1] or p[2] != p[3])
    return a["pooling_type"] == "avg" and not (a["exclusive"] or a["adaptive"] or
                                               a["global_pooling"]) and \
        (asymmetric or a["ceil_mode"] or a["padding_algorithm"] == "SAME")


def _onednn_nearest_differs(ins, a):
    """Paddle's CPU kernel reads cell int(ratio * k) (int(ratio * k + 0.5) with align_corners)
    for output cell k; its oneDNN kernel reads floor((k + 0.5) * in / out): whether the two
    pick another cell somewhere."""
    x = ins["X"]
    in_hw = x.shape[1:3] if a["data_layout"] == "NHWC" else x.shape[2:]
    out_hw, scales = interp_output_size(in_hw, (a["out_h"], a["out_w"]), a["scale"])
    for n, o, s in zip(in_hw, out_hw, scales):
        k = np.arange(o)
        at_k = interp_ratio(n, o, s, a["align_corners"]) * k.astype(np.float32)
        cpu = (at_k + 0.5 if a["align_corners"] else at_k).astype(np.int64)
        if np.any(cpu != np.floor((k + 0.5) * n / o).astype(np.int64)):
            return True
    return False


ALL = list(PREDICTOR_MODES)
_0D_INT32_ARG = (lambda ins, a: ins["X"].ndim == 0 and a["dtype"] == dtypes.INT32,
                 "for a 0-D X and dtype int32 it checks a dim X does not have ('The element "
                 "num of the argmin/argmax input at axis is <garbage>')")
_ONEDNN_0D = (lambda ins, a: ins["X"].ndim == 0,
              "its oneDNN kernel fails on a 0-D X ('could not create a primitive descriptor "
              "for a reorder primitive')")
_COMPARE = (_compare_axis_off_the_end,
            "its shape inference broadcasts numpy-style whatever axis says, and rejects (or "
            "mis-shapes) a Y placed elsewhere ('Broadcast dimension mismatch')")

# Where Paddle is wrong and Tape is right: (op, modes, the cases it may hit, what Paddle does).
# A listed case may fail in those modes (it is then reported as xfailed); every entry must show
# on some case, and the other modes must serve the case right.
PADDLE_BUGS = [
    ("one_hot_v2", ALL, lambda ins, a: np.any((ins["X"] < 0) | (ins["X"] >= a["depth"])),
     "its kernel raises for an id outside [0, depth) although allow_out_of_range is set "
     "('Illegal index value, Input(input) value should be at least 0')"),
    ("accuracy", ALL, lambda ins, a: len(ins["Out"]) == 0,
     "with no samples its kernel returns before writing Correct and Total (garbage)"),
    ("arg_max", ALL, *_0D_INT32_ARG),
    ("arg_min", ALL, *_0D_INT32_ARG),
    ("batch_norm", ALL, lambda ins, a: "MomentumTensor" in ins and a["trainable_statistics"]
     and not a["use_global_stats"],
     "it ignores MomentumTensor, which its proto says has 'higher priority than "
     "attr(momentum)' (its kernel signature drops it)"),
    ("batch_norm", ["no_onednn", "no_ir_optim"], lambda ins, a: not (
        "Scale" in ins and "Bias" in ins or a["use_global_stats"] or a["trainable_statistics"]),
     "its batch_norm_infer kernel fails without Scale or without Bias "
     "('std::bad_array_new_length', or a crash)"),
    ("batch_norm", ["default"], lambda ins, a: "Scale" not in ins or "Bias" not in ins,
     "its oneDNN kernel crashes (SIGSEGV) without Scale or without Bias"),
    ("cross_entropy", ALL, lambda ins, a: ins["X"].ndim == 1,
     "its kernel needs X of rank >= 2 (''ReshapeToMatrix()' is only used for flatten high rank "
     "tensors to matrixs')"),
    ("dropout", ["no_ir_optim"], lambda ins, a: ins["X"].ndim < 2,
     "its is_test kernel needs rank >= 2 ('Input dimension number(num_col_dims) must be between "
     "0 and 1'); by default an IR pass removes the op"),
    ("assign_value", ["default", "no_onednn"], lambda ins, a: True,
     "in a model without feeds (assign_value takes no input), constant_folding_pass folds the "
     "fetch op too (fetch: 'The Variable type must be ...PhiVector..., but the type it holds is "
     "DenseTensor'), as for fill_constant below"),
    ("fill_constant", ["default", "no_onednn"], lambda ins, a: not ins,
     "in a model without feeds, constant_folding_pass folds the fetch op too (fetch: 'The "
     "Variable type must be ...PhiVector..., but the type it holds is DenseTensor'); served "
     "with config.delete_pass('constant_folding_pass')"),
    ("pool2d", ALL, lambda ins, a: a["pooling_type"] == "max" and a["adaptive"],
     "its max pooling ignores adaptive (the kernel passes adaptive=false): ksize windows slid "
     "by strides over the adaptive output"),
    ("matmul_v2", ["default", "no_onednn"], lambda ins, a: min(ins["X"].ndim, ins["Y"].ndim)
     >= 3 and ins["X"].shape[:-2] != ins["Y"].shape[:-2],
     "gpu_cpu_map_matmul_v2_to_matmul_pass makes a batch-broadcasting matmul_v2 a matmul, which "
     "does not broadcast ('The batch size of the two matrices should be equal')"),
    *((op, ALL, *_COMPARE) for op in ("equal", "not_equal", "less_than", "less_equal",
                                       "greater_than", "greater_equal")),
    ("elementwise_div", ["default"], lambda ins, a: ins["X"].size < ins["Y"].size,
     "its oneDNN kernel computes Y / X when X broadcasts to Y's shape"),
    ("softplus", ["default"],
     lambda ins, a: np.any(a["beta"] * ins["X"] > a["threshold"]),
     "its oneDNN kernel ignores threshold (Out = X where beta * X > threshold)"),
    ("layer_norm", ["default"], lambda ins, a: a["begin_norm_axis"] == ins["X"].ndim - 1 and (
        "Bias" in ins and "Scale" not in ins or
        "Scale" in ins and "Bias" not in ins and ins["X"].shape[-1] > 1),
     "its oneDNN kernel (begin_norm_axis = rank - 1) ignores Scale without Bias and Bias "
     "without Scale"),
    ("slice", ["default"], lambda ins, a: _start_before(ins, a, True),
     "its oneDNN kernel fails on a start before -dim ('could not construct a sub-memory'); the "
     "export makes it 0 on a known dim, not on the unknown batch dim"),
    ("slice", ["default"], lambda ins, a: len(a["decrease_axis"]) == ins["Input"].ndim,
     "its oneDNN kernel gives shape (1,) where the slice decreases to 0-D"),
    ("split", ["default"], lambda ins, a: _inferred_section(ins, a, True),
     "its oneDNN kernel fails on a -1 section ('could not construct a sub-memory'); the export "
     "resolves it on a known dim, not on the unknown batch dim"),
    ("flatten_contiguous_range", ["default"], *_ONEDNN_0D),
    ("squeeze2", ["default"], *_ONEDNN_0D),
    ("matmul_v2", ["default"], lambda ins, a: a["trans_y"] and ins["Y"].ndim >= 2 and
     ins["Y"].shape[-1] == 1 and ins["Y"].shape[-2] > 1,
     "its oneDNN kernel gives garbage for trans_y with Y of shape (..., n, 1)"),
    ("hard_swish", ALL, lambda ins, a: (a["threshold"], a["scale"], a["offset"]) != (6, 6, 3),
     "its kernel ignores threshold, scale and offset (phi's hardswish takes none): always 6, 6 "
     "and 3"),
    ("mish", ["default"], lambda ins, a: np.any(ins["X"] > a["threshold"]),
     "its oneDNN kernel ignores threshold (softplus is log(1 + exp(X)) everywhere)"),
    ("cumsum", ALL, lambda ins, a: a["exclusive"] and ins["X"].size == 1,
     "its kernel ignores exclusive where X holds one element (Out = X, not 0)"),
    ("prelu", ["default"], lambda ins, a: ins["Alpha"].ndim != 1 and a["mode"] != "element",
     "its oneDNN kernel fails on an Alpha that is not 1-D in modes all and channel ('could not "
     "create a primitive descriptor for a reorder primitive'); its CPU kernel takes it"),
    ("expand_v2", ["default"], lambda ins, a: -1 in a["shape"] and len(a["shape"]) > ins["X"].ndim,
     "its oneDNN kernel reads a -1 in shape against X's dim at the same position, not the one "
     "aligned to the end, where shape adds dims (wrong shapes, or 'The value (2) of the "
     "non-singleton dimension does not match')"),
    *((op, ALL, lambda ins, a: any(p >= s for p, s in zip(a["output_padding"], a["strides"])),
       "its shape rule accepts an output_padding below max(stride, dilation), but its kernels "
       "reject one of stride or more ('Output_height and padding(padding_up, padding_down) "
       "are inconsistent'; oneDNN: 'could not create a primitive descriptor for a "
       "deconvolution')") for op in ("conv2d_transpose", "depthwise_conv2d_transpose")),
    ("nearest_interp_v2", ["default"], _onednn_nearest_differs,
     "its oneDNN kernel reads cell floor((k + 0.5) * in / out) for output cell k, whatever "
     "align_corners says, where its CPU kernel (and Tape) reads int(ratio * k)"),
    ("pool2d", ["default"], _avg_over_trailing_padding,
     "its oneDNN and CPU kernels disagree on what non-exclusive average pooling divides by "
     "where a window reaches the trailing padding; Tape divides as the CPU kernel"),
]

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
