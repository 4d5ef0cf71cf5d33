"""The cases tests/static/test_paddle_serves_ops.py has Paddle's predictor serve: the seeds per
op, the ops it skips and why, the outputs Paddle wants in place, what the export changes for
Paddle (EXPORT_FIXES) and where Paddle is wrong and Tape is right (PADDLE_BUGS)."""
import numpy as np
from paddle_runner import PREDICTOR_MODES

from tape import dtypes
from tape.geometry import align_shapes, interp_output_size, interp_ratio

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
