"""expand_v2, tile, cumsum, index_select, argsort (tape/ops/rearrange.py) as Expand, Tile,
CumSum, Gather and TopK."""
import numpy as np

from ..table import converts
from .tensor import sorted_top


@converts("expand_v2")
def expand_v2(c):
    """Expand broadcasts both ways: a -1 (keep X's dim) is a 1 there."""
    c.node("Expand", [c.input("X"), c.ints([1 if n == -1 else n for n in c.attrs["shape"]])],
           [c.output("Out")])


@converts("tile")
def tile(c):
    x, times = c.input("X"), list(c.attrs["repeat_times"])
    rank = c.rank(x)
    if len(times) > rank:   # X gets leading 1s, as Paddle pads it
        x = c.unsqueeze(x, range(len(times) - rank))
    times = [1] * (max(rank, len(times)) - len(times)) + times
    if not times:
        c.identity(x, c.output("Out"))
        return
    c.node("Tile", [x, c.ints(times)], [c.output("Out")])


@converts("cumsum")
def cumsum(c):
    x, a = c.input("X"), c.attrs
    rank = c.rank(x)
    flat = a["flatten"] or rank == 0
    if flat:
        x = c.reshape(x, [-1])
    total = c.node("CumSum", [x, c.const(np.int64(0 if flat else a["axis"] % rank))],
                   exclusive=int(a["exclusive"]), reverse=int(a["reverse"]))
    if rank == 0 and not a["flatten"]:
        total = c.reshape(total, [])
    c.identity(total, c.output("Out"))


@converts("index_select")
def index_select(c):
    """Gather along dim: a negative index counts from the end, in both."""
    x, index = c.input("X"), c.input("Index")
    if c.rank(index) == 2:
        index = c.squeeze(index, [1])
    c.node("Gather", [x, index], [c.output("Out")], axis=c.attrs["dim"] % c.rank(x))


@converts("argsort")
def argsort(c):
    """TopK of the whole axis."""
    def whole_axis(x, axis):
        return c.node("Gather", [c.node("Shape", [x]), c.ints([axis])], axis=0)
    sorted_top(c, whole_axis, c.attrs["descending"])
