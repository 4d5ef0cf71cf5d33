"""Converters of the image ops: convolutions (grouped, depthwise, transposed), resizing
(bilinear / nearest interpolation) and 3-D padding. Conv, ConvTranspose and Resize take NCHW:
NHWC goes through a Transpose on either side of them; the Gathers and Pads work on either
layout's axes."""
from __future__ import annotations

import numpy as np

from ... import dtypes
from ...geometry import conv_transpose_geometry, resolve_paddings
from ..table import NoOnnxMappingError, converts

_TO_NCHW, _TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _image_sides(c, x, layout: str) -> tuple:
    """(H, W) of a 4-D image in ``layout`` (-1 where unknown)."""
    shape = c.shape(x)
    return tuple(shape[1:3]) if layout == "NHWC" else tuple(shape[2:])


def _known(c, sides: tuple, what: str) -> tuple:
    if min(sides) < 0:
        raise NoOnnxMappingError(f"onnx export: op '{c.op.type}' needs the image sides of its "
                                 f"{what} known, has {list(sides)} (opset {c.opset})")
    return sides


def _as_nchw(c, x, layout: str) -> str:
    return c.node("Transpose", [x], perm=_TO_NCHW) if layout == "NHWC" else x


def _write_nchw(c, layout: str, make, out: str) -> None:
    """``make(target)`` adds the NCHW node writing ``target``; in NHWC it writes a temporary
    that a Transpose turns into ``out``."""
    if layout != "NHWC":
        make(out)
        return
    nchw = c.temp("nchw")
    make(nchw)
    c.node("Transpose", [nchw], [out], perm=_TO_NHWC)


# ---- convolutions ----

@converts("conv2d", "depthwise_conv2d")
def conv2d(c):
    """Paddle's paddings (2 or 4, SAME, VALID) resolved as its kernel resolves them; groups as
    Conv's group (depthwise: one per channel)."""
    x, w, a = c.input("Input"), c.input("Filter"), c.attrs
    layout = a["data_format"]
    kh, kw = c.shape(w)[2:]
    in_hw = _image_sides(c, x, layout)
    if a["padding_algorithm"] == "SAME":
        _known(c, in_hw, "Input")
    pads, dilations = resolve_paddings(in_hw, (kh, kw), a["strides"], a["paddings"],
                                       a["dilations"], a["padding_algorithm"])
    images = _as_nchw(c, x, layout)
    _write_nchw(c, layout, lambda out: c.node(
        "Conv", [images, w], [out], kernel_shape=[kh, kw], strides=list(a["strides"]),
        dilations=list(dilations), group=a["groups"],
        pads=[pads[0], pads[2], pads[1], pads[3]]), c.output("Output"))


@converts("conv2d_transpose", "depthwise_conv2d_transpose")
def conv2d_transpose(c):
    """ConvTranspose with the pads Tape's shape rule resolves (SAME from the input sides). The
    cells that output_size / output_padding add past the smallest output are the full
    transposed convolution's cells that the bottom / right pads would crop, then zeros: they
    come from smaller end pads and a zero Pad, not from ConvTranspose's output_padding, which
    ONNX bounds by the stride (onnxruntime 1.32: "output_padding (1) may be too large for
    stride (1)"; onnx's reference evaluator fails too) where Paddle allows it below
    max(stride, dilation)."""
    x, w, a = c.input("Input"), c.input("Filter"), c.attrs
    layout = a["data_format"]
    kh, kw = c.shape(w)[2:]
    in_hw = _image_sides(c, x, layout)
    if a["padding_algorithm"] == "SAME" or a["output_size"]:
        _known(c, in_hw, "Input")
    pads, dilations, out_hw, smallest = conv_transpose_geometry(
        in_hw, (kh, kw), a["strides"], a["paddings"], a["dilations"], a["padding_algorithm"],
        a["output_size"], a["output_padding"])
    extra = [o - s for o, s in zip(out_hw, smallest)] if a["output_size"] else \
        list(a["output_padding"] or (0, 0))
    ends = [pads[1] - extra[0], pads[3] - extra[1]]
    images = _as_nchw(c, x, layout)

    def make(out):
        conv = c.node("ConvTranspose", [images, w], None if min(ends) < 0 else [out],
                      kernel_shape=[kh, kw], strides=list(a["strides"]),
                      dilations=list(dilations), group=a["groups"],
                      pads=[pads[0], pads[2], max(ends[0], 0), max(ends[1], 0)])
        if min(ends) < 0:
            zeros = [0, 0, 0, 0, 0, 0, max(-ends[0], 0), max(-ends[1], 0)]
            c.node("Pad", [conv, c.ints(zeros)], [out])
    _write_nchw(c, layout, make, c.output("Output"))


# ---- padding ----

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


@converts("pad3d")
def pad3d(c):
    """Pad in modes constant, reflect and edge (replicate); circular as a Gather along each
    padded axis of the cells (i - before) mod side. Pads from the attribute or, at run time,
    from the Paddings tensor."""
    x, a = c.input("X"), c.attrs
    first = 1 if a["data_format"] == "NDHWC" else 2
    # Paddle's (left, right, top, bottom, front, back) runs from the last spatial axis
    order = [(4, 5), (2, 3), (0, 1)]    # (before, after) of depth, height, width
    if c.has_input("Paddings"):
        given = c.cast(c.input("Paddings"), dtypes.INT64)
        sides = [tuple(c.node("Gather", [given, c.ints([i])]) for i in pair) for pair in order]
    else:
        sides = [tuple(c.ints([a["paddings"][i]]) for i in pair) for pair in order]
    if a["mode"] != "circular":
        zero = c.ints([0])
        spatial_before, spatial_after = [s[0] for s in sides], [s[1] for s in sides]
        lead = [zero] * first
        trail = [zero] * (2 - first)
        pads = c.node("Concat", lead + spatial_before + trail + lead + spatial_after + trail,
                      axis=0)
        inputs = [x, pads] + ([c.scalar_like(a["value"], x)] if a["mode"] == "constant" else [])
        c.node("Pad", inputs, [c.output("Out")], mode=_PAD_MODES[a["mode"]])
        return
    padded = x
    shape = c.node("Shape", [x])
    for axis, (before, after) in enumerate(sides):
        dim = first + axis
        side = c.node("Gather", [shape, c.ints([dim])])
        length = c.node("Add", [c.node("Add", [side, before]), after])
        cells = c.node("Range", [c.const(np.int64(0)),
                                 c.squeeze(length, [0]), c.const(np.int64(1))])
        wrapped = c.node("Mod", [c.node("Sub", [cells, before]), side])
        padded = c.node("Gather", [padded, wrapped], axis=dim)
    c.identity(padded, c.output("Out"))


# ---- resizing ----

def _linear_mode(align_corners: bool, align_mode: int) -> str:
    """Resize's coordinate transformation for Paddle's bilinear sampling positions: cell k of
    an output side reads (in - 1) / (out - 1) * k with align_corners, ratio * k (asymmetric:
    the ratio 1 / scale where a scale applies, as Resize's with scales, else in / out, as
    Resize's with sizes), or ratio * (k + 0.5) - 0.5 clipped at 0 with align_mode 0
    (pytorch_half_pixel: position 0 for an output of one cell, as Paddle's ratio 0 then).
    Bilinear weights are continuous in the position, so Resize's float rounding of it stays
    within rounding of Paddle's."""
    if align_corners:
        return "align_corners"
    return "pytorch_half_pixel" if align_mode == 0 else "asymmetric"


def _interp_sizes(c, x, axes):
    """Per image axis, as 1-element values: (input side, output side, the scale that sets the
    step, or None), as tape.geometry.interp_output_size picks them: the SizeTensor values, else
    OutSize's, else the sides scaled (floor(float32(in) * scale)) by the Scale tensor or the
    scale attribute, else out_h / out_w; the step follows a scale wherever one is given, even
    with OutSize."""
    a = c.attrs
    shape = c.node("Shape", [x])
    sides = [c.node("Gather", [shape, c.ints([axis])]) for axis in axes]
    scales = [None, None]
    if c.has_input("Scale"):
        # one scale for both sides, or two
        given = c.node("Expand", [c.cast(c.input("Scale"), dtypes.FP32), c.ints([2])])
        scales = [c.node("Gather", [given, c.ints([i])]) for i in range(2)]
    elif len(a["scale"]) > 1:
        scales = [c.const(np.float32([s])) for s in a["scale"][:2]]
    if c.has_input("SizeTensor"):
        outs = [c.reshape(c.cast(t, dtypes.INT64), [1]) for t in c.inputs("SizeTensor")]
        scales = [None, None]
    elif c.has_input("OutSize"):
        given = c.cast(c.input("OutSize"), dtypes.INT64)
        outs = [c.node("Gather", [given, c.ints([i])]) for i in range(2)]
    elif scales[0] is not None:
        outs = [c.cast(c.node("Mul", [c.cast(side, dtypes.FP32), scale]), dtypes.INT64)
                for side, scale in zip(sides, scales)]
    else:
        outs = [c.ints([a["out_h"]]), c.ints([a["out_w"]])]
    return list(zip(sides, outs, scales))


def _steps(c, side, out, scale, align_corners):
    """(the output cells k, int64; ratio * k in Paddle's float32 arithmetic, with its ratio
    (tape.geometry.interp_ratio): (in - 1) / (out - 1) with align_corners, else float32(1 /
    scale) (the division in double) where a scale applies, else in / out; 0 for one cell)."""
    f32, one = dtypes.FP32, c.ints([1])
    if align_corners:
        ratio = c.node("Div", [c.cast(c.node("Sub", [side, one]), f32),
                               c.cast(c.node("Sub", [out, one]), f32)])
    elif scale is not None:
        ratio = c.cast(c.node("Div", [c.const(np.float64([1.0])), c.cast(scale, dtypes.FP64)]),
                       f32)
    else:
        ratio = c.node("Div", [c.cast(side, f32), c.cast(out, f32)])
    ratio = c.node("Where", [c.node("Greater", [out, one]), ratio, c.const(np.float32([0]))])
    cells = c.node("Range", [c.const(np.int64(0)), c.squeeze(out, [0]), c.const(np.int64(1))])
    return cells, ratio, c.node("Mul", [c.cast(cells, f32), ratio])


def _nearest_cells(c, side, out, scale, align_corners):
    """(k, the input cell output cell k copies) in Paddle's arithmetic (onnxruntime's Resize
    picks a neighbour where a position falls on a cell boundary, even against ONNX's exact
    one: tests/onnx/test_onnx_vision.py): int(ratio * k), or
    int(ratio * k + 0.5) with align_corners (the sum in double), below the side."""
    cells, _, position = _steps(c, side, out, scale, align_corners)
    if align_corners:
        position = c.node("Add", [c.cast(position, dtypes.FP64), c.const(np.float64([0.5]))])
    return cells, c.node("Min", [c.cast(position, dtypes.INT64),
                                 c.node("Sub", [side, c.ints([1])])])


def _bilinear_taps(c, side, out, scale, align_corners, centred, height):
    """(k, the low and high input cells output cell k reads, the high one's weight) as Tape's
    kernel computes them: at ratio * k, or with ``centred`` (align_mode 0) at ratio * (k + 0.5)
    - 0.5 clipped at 0, in double along the ``height`` and in float32 along the width."""
    cells, ratio, position = _steps(c, side, out, scale, align_corners)
    f32, f64 = dtypes.FP32, dtypes.FP64
    if centred:
        kind, dtype = (f64, np.float64) if height else (f32, np.float32)
        half = c.const(dtype([0.5]))
        middle = c.node("Sub", [c.node("Mul", [c.cast(ratio, kind), c.node(
            "Add", [c.cast(cells, kind), half])]), half])
        position = c.node("Max", [c.cast(middle, f32), c.const(np.float32([0]))])
    else:
        middle = position
    low = c.node("Max", [c.cast(middle, dtypes.INT64), c.ints([0])])
    high = c.node("Min", [c.node("Add", [low, c.ints([1])]), c.node("Sub", [side, c.ints([1])])])
    return cells, low, high, c.node("Sub", [position, c.cast(low, f32)])


def _bilinear_by_taps(c, x, axes, sizes, unchanged) -> str:
    """Each side in turn: low cells times 1 - weight plus high cells times weight."""
    a, resized = c.attrs, x
    centred = a["align_mode"] == 0 and not a["align_corners"]
    for axis, (side, out, scale), height in zip(axes, sizes, (True, False)):
        cells, low, high, far = _bilinear_taps(c, side, out, scale, a["align_corners"],
                                               centred, height)
        low, high = (c.node("Where", [unchanged, cells, v]) for v in (low, high))
        far = c.cast(c.node("Where", [unchanged, c.const(np.float32([0])), far]), c.dtype(x))
        far = c.unsqueeze(far, list(range(1, 4 - axis))) if axis < 3 else far
        near = c.node("Sub", [c.scalar_like(1.0, x), far])
        resized = c.node("Add", [
            c.node("Mul", [c.node("Gather", [resized, low], axis=axis), near]),
            c.node("Mul", [c.node("Gather", [resized, high], axis=axis), far])])
    return resized


@converts("bilinear_interp_v2", "nearest_interp_v2")
def interp_v2(c):
    """Sized as Tape's kernels size it (``_interp_sizes``). Nearest: a Gather of the cells
    Paddle's arithmetic picks along each side; bilinear: Resize, with the scales where a scale
    sets the step (Resize's output sides floor(in * scale) and step 1 / scale are Paddle's),
    else the sizes; sized by OutSize but stepped by a scale, which Resize cannot take, as
    Gathers of the two cells each output cell reads, weighted. All copy X where the output has
    its sides, as Paddle's kernel does."""
    x, a = c.input("X"), c.attrs
    layout = a["data_layout"]
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    sizes = _interp_sizes(c, x, axes)
    unchanged = c.node("And", [c.node("Equal", [side, out]) for side, out, _ in sizes])
    scales = [s for _, _, s in sizes]
    if a["interp_method"] == "nearest":
        resized = x
        for axis, (side, out, scale) in zip(axes, sizes):
            cells, source = _nearest_cells(c, side, out, scale, a["align_corners"])
            resized = c.node("Gather", [resized, c.node("Where", [unchanged, cells, source])],
                             axis=axis)
        c.identity(resized, c.output("Out"))
        return
    if c.has_input("OutSize") and scales[0] is not None and not a["align_corners"]:
        # Resize takes sizes or scales, not both: OutSize's sides stepped by 1 / scale
        c.identity(_bilinear_by_taps(c, x, axes, sizes, unchanged), c.output("Out"))
        return
    images = _as_nchw(c, x, layout)
    if scales[0] is not None and not c.has_input("OutSize"):   # the scales size the output
        ones = c.const(np.ones(2, np.float32))
        inputs = [images, "", c.node("Concat", [ones, *scales], axis=0)]
    else:
        lead = c.node("Slice", [c.node("Shape", [images]), c.ints([0]), c.ints([2]),
                                c.ints([0])])
        inputs = [images, "", "", c.node("Concat", [lead, *(o for _, o, _ in sizes)], axis=0)]
    _write_nchw(c, layout, lambda out: c.node(
        "Resize", inputs, [out], mode="linear",
        coordinate_transformation_mode=_linear_mode(a["align_corners"], a["align_mode"])),
        c.output("Out"))
