"""The image ops' ONNX forms beyond their generic cases: the inputs and outputs those cases leave
out (interp's size tensors, pad3d's Paddings tensor, the norms' statistics), transposed
convolutions whose output_padding reaches the stride, and Resize's sampling positions over a
sweep of sizes."""
import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import tape.onnx  # noqa: E402
import tape.static as static  # noqa: E402
from tape.registry import REGISTRY  # noqa: E402
from tape.tape import get_global_tape  # noqa: E402
from tape.testing import run_op  # noqa: E402
from tape.variable import Variable  # noqa: E402

TOLERANCE = 1e-5    # of the output's scale, max(1, max |output|)
RNG = np.random.default_rng(7)


def _floats(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def _model(op_type, x, others, attrs, slots, opset=tape.onnx.DEFAULT_OPSET):
    """The ONNX model of one op: X (or Input) fed, ``others`` ({slot: array or [arrays]})
    constants, ``slots`` fetched."""
    info = REGISTRY[op_type]
    fed = info.input_names[0]

    def one_op(v):
        inputs = {fed: [v], **{s: [Variable(a) for a in (o if isinstance(o, list) else [o])]
                               for s, o in others.items()}}
        outs = get_global_tape().run(info, inputs, attrs)
        return [outs[s][0] for s in slots]

    return tape.onnx.to_onnx(static.trace(one_op, x), opset_version=opset)


def _check_served(op_type, x, others, attrs, slots, opset=tape.onnx.DEFAULT_OPSET):
    """onnxruntime's outputs at X's batch and at one two rows longer match Tape's eager ones."""
    session = ort.InferenceSession(_model(op_type, x, others, attrs, slots, opset)
                                   .SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (x, np.concatenate([x, x[:2]])):
        eager = run_op(op_type, {REGISTRY[op_type].input_names[0]: batch, **others}, attrs)
        got = session.run(None, {session.get_inputs()[0].name: batch})
        for slot, g in zip(slots, got):
            e = eager[slot][0].numpy()
            assert g.shape == e.shape, f"{op_type} {slot}: {g.shape}, Tape's {e.shape}"
            scale = max(1.0, float(np.abs(e).max(initial=0)))
            assert np.abs(g - e).max(initial=0) / scale <= TOLERANCE, \
                f"{op_type} {slot} (batch {len(batch)}, {attrs}) differs from Tape"


# ---- transposed convolution: the cells past the smallest output ----

@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("extra", [
    {"strides": [1, 1], "dilations": [2, 2], "paddings": [0, 0], "output_padding": [1, 1]},
    {"strides": [1, 2], "dilations": [2, 1], "paddings": [1, 0, 0, 1],
     "output_padding": [1, 1]},
    {"strides": [2, 2], "dilations": [1, 1], "paddings": [1, 1], "output_size": [6, 7]},
])
def test_conv2d_transpose_output_cells_past_the_stride(layout, extra):
    """output_padding at the stride (Paddle allows it below max(stride, dilation); ONNX's
    ConvTranspose bounds it by the stride), and cells that the end pads would crop."""
    x = _floats(2, 2, 3, 4) if layout == "NCHW" else _floats(2, 3, 4, 2)
    attrs = {"groups": 2, "data_format": layout, **extra}
    _check_served("conv2d_transpose", x, {"Filter": _floats(2, 3, 3, 2)}, attrs, ["Output"])


# ---- the norms' statistics ----

@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_group_norm_mean_and_variance_export(layout):
    x = _floats(2, 6, 3, 2) if layout == "NCHW" else _floats(2, 3, 2, 6)
    _check_served("group_norm", x, {"Scale": _floats(6), "Bias": _floats(6)},
                  {"groups": 3, "data_layout": layout, "epsilon": 1e-5},
                  ["Y", "Mean", "Variance"])


def test_instance_norm_saved_statistics_export():
    """SavedVariance holds 1 / sqrt(variance + epsilon), flattened to (N * C,) as SavedMean."""
    _check_served("instance_norm", _floats(2, 3, 4, 2), {"Scale": _floats(3)},
                  {"epsilon": 1e-3}, ["Y", "SavedMean", "SavedVariance"])


# ---- interpolation ----

_MODES = [{"interp_method": "bilinear", "align_corners": True, "align_mode": 1},
          {"interp_method": "bilinear", "align_corners": False, "align_mode": 0},
          {"interp_method": "bilinear", "align_corners": False, "align_mode": 1},
          {"interp_method": "nearest", "align_corners": True, "align_mode": 1},
          {"interp_method": "nearest", "align_corners": False, "align_mode": 1}]


# (input side, output side or scale) where a sampling position falls on a cell boundary in
# exact arithmetic and Paddle's float32 arithmetic lands on the other side of it (Resize's
# nearest picks another cell at each): 14 -> 2 steps by 7 (Resize's 1 / (2 / 14) is below 7);
# 14 -> 23 with align_corners reads 11 * 13 / 22 = 6.5, Paddle 6.4999995; 11 * 1.7 reads
# 17 / 1.7 = 10, Paddle 17 * float32(1 / 1.7) = 9.9999995.
_BOUNDARIES = [(14, 2), (14, 23), (11, 1.7), (16, 1.7)]


def test_onnxruntime_resize_misses_a_boundary_that_onnx_defines():
    """Why nearest is not a Resize: resizing 14 cells to 2 (asymmetric, floor), output cell 1
    is at 1 / (2 / 14) = 7 by ONNX's definition (onnx's reference evaluator reads cell 7, and
    so do Paddle and Tape); onnxruntime 1.32 reads cell 6. If this fails, onnxruntime has
    changed, and Resize may serve nearest_interp_v2 again."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
                            coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 14, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 1])],
        [numpy_helper.from_array(np.array([1, 1, 2, 1], np.int64), "sizes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(14, dtype=np.float32).reshape(1, 1, 14, 1)
    assert ReferenceEvaluator(model).run(None, {"x": x})[0].ravel().tolist() == [0, 7]
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": x})[0].ravel().tolist() == [0, 6]
    eager = run_op("nearest_interp_v2", {"X": x}, {"interp_method": "nearest", "out_h": 2,
                                                   "out_w": 1, "align_corners": False})
    assert eager["Out"][0].numpy().ravel().tolist() == [0, 7]


@pytest.mark.parametrize("mode", _MODES, ids=lambda m: "-".join(map(str, m.values())))
def test_resize_samples_where_paddle_samples(mode):
    """Every (in, out) side pair of 1..6 by 1..8, scales over 1..6, and the boundaries above,
    in each sampling mode."""
    op_type = f"{mode['interp_method']}_interp_v2"
    sizes = list(itertools.product(range(1, 7), range(1, 9)))
    for (in_h, out_h), (in_w, out_w) in zip(sizes, sizes[7:] + sizes[:7]):
        _check_served(op_type, _floats(2, 2, in_h, in_w), {},
                      {**mode, "out_h": out_h, "out_w": out_w}, ["Out"])
    for side, scale in itertools.product(range(1, 7), (0.5, 0.75, 1.5, 2.0, 2.5, 3.0)):
        if int(side * scale) >= 1:
            _check_served(op_type, _floats(2, 1, side, 7 - side), {},
                          {**mode, "scale": [scale, 1.25]}, ["Out"])
    for side, size in _BOUNDARIES:
        sized = {"scale": [size, 1.0]} if isinstance(size, float) else \
            {"out_h": size, "out_w": 3}
        _check_served(op_type, _floats(2, 1, side, 3), {}, {**mode, **sized}, ["Out"])


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("sized_by", ["OutSize", "SizeTensor", "Scale", "Scale2"])
@pytest.mark.parametrize("mode", _MODES[1:4], ids=lambda m: "-".join(map(str, m.values())))
def test_interp_sized_by_a_tensor(mode, sized_by, layout):
    x = _floats(2, 3, 4, 2) if layout == "NCHW" else _floats(2, 4, 2, 3)
    others = {"OutSize": {"OutSize": np.array([5, 3], np.int32)},
              "SizeTensor": {"SizeTensor": [np.array([7], np.int64), np.array([1], np.int32)]},
              "Scale": {"Scale": np.array([1.5], np.float32)},
              "Scale2": {"Scale": np.array([0.5, 2.5], np.float32)}}[sized_by]
    op_type = f"{mode['interp_method']}_interp_v2"
    _check_served(op_type, x, others, {**mode, "data_layout": layout, "out_h": 9, "out_w": 9},
                  ["Out"])


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("mode", _MODES, ids=lambda m: "-".join(map(str, m.values())))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_interp_sized_by_out_size_and_stepped_by_a_scale(layout, mode, opset):
    """OutSize gives the sides and the scale attribute the step (1 / scale), as in Paddle:
    Resize takes sizes or scales, not both, so bilinear is written out there."""
    x = _floats(2, 2, 4, 5) if layout == "NCHW" else _floats(2, 4, 5, 2)
    _check_served(f"{mode['interp_method']}_interp_v2", x, {"OutSize": np.array([5, 7])},
                  {**mode, "data_layout": layout, "scale": [1.5, 1.6]}, ["Out"], opset)


# ---- pad3d ----

@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad3d_with_a_paddings_tensor(mode, layout, opset):
    """Pads read at run time; circular ones wrap around more than once."""
    x = _floats(2, 2, 3, 4, 3) if layout == "NCDHW" else _floats(2, 3, 4, 3, 2)
    paddings = [2, 1, 0, 3, 1, 2] if mode == "reflect" else [5, 0, 3, 4, 0, 7]
    if mode == "reflect" and layout == "NDHWC":
        paddings = [1, 2, 3, 0, 2, 1]
    for given in ({"Paddings": np.array(paddings, np.int32)}, {}):
        _check_served("pad3d", x, given, {"paddings": paddings, "mode": mode, "value": -1.5,
                                          "data_format": layout}, ["Out"], opset)
