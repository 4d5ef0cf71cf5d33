"""ReLU's variants (tape/ops/relu_variants.py): ONNX's own op where it computes Paddle's
function with Paddle's attributes (HardSigmoid, Elu, Selu, PRelu), else written out."""
from ..table import converts


@converts("relu6")
def relu6(c):
    x = c.input("X")
    c.node("Clip", [x, c.scalar_like(0, x), c.scalar_like(6, x)], [c.output("Out")])


@converts("hard_sigmoid")
def hard_sigmoid(c):
    c.node("HardSigmoid", [c.input("X")], [c.output("Out")], alpha=float(c.attrs["slope"]),
           beta=float(c.attrs["offset"]))


@converts("hard_swish")
def hard_swish(c):
    """X * clip(X + offset, 0, threshold) / scale, any attributes (ONNX's HardSwish fixes
    them)."""
    x, a = c.input("X"), c.attrs
    gate = c.node("Clip", [c.node("Add", [x, c.scalar_like(a["offset"], x)]),
                           c.scalar_like(0, x), c.scalar_like(a["threshold"], x)])
    c.node("Div", [c.node("Mul", [x, gate]), c.scalar_like(a["scale"], x)], [c.output("Out")])


@converts("swish", "silu")
def swish(c):
    x = c.input("X")
    c.node("Mul", [x, c.node("Sigmoid", [x])], [c.output("Out")])


@converts("mish")
def mish(c):
    """X * tanh(softplus(X)), softplus(X) = X above the threshold (ONNX's Mish has none)."""
    x = c.input("X")
    above = c.node("Greater", [x, c.scalar_like(c.attrs["threshold"], x)])
    soft = c.node("Where", [above, x, c.node("Softplus", [x])])
    c.node("Mul", [x, c.node("Tanh", [soft])], [c.output("Out")])


@converts("elu")
def elu(c):
    c.node("Elu", [c.input("X")], [c.output("Out")], alpha=float(c.attrs["alpha"]))


@converts("selu")
def selu(c):
    c.node("Selu", [c.input("X")], [c.output("Out")], alpha=float(c.attrs["alpha"]),
           gamma=float(c.attrs["scale"]))


@converts("prelu")
def prelu(c):
    """Alpha reshaped to broadcast against X as the mode says (element: a sample's worth of
    its first values, as Paddle reads them)."""
    x, alpha, a = c.input("X"), c.input("Alpha"), c.attrs
    shape = c.shape(x)
    if a["mode"] == "all":
        slope = c.reshape(alpha, [])
    elif a["mode"] == "channel" and a["data_format"] == "NHWC":
        slope = c.reshape(alpha, [shape[-1]])
    elif a["mode"] == "channel":
        slope = c.reshape(alpha, [shape[1]] + [1] * (len(shape) - 2))
    else:
        size = 1
        for n in shape[1:]:
            size *= n
        first = c.node("Slice", [c.reshape(alpha, [-1]), c.ints([0]), c.ints([size])])
        slope = c.reshape(first, shape[1:])
    c.node("PRelu", [x, slope], [c.output("Out")])
