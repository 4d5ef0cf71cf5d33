"""concat and split along axis 0 batch (each sample's sequence cut into steps and its steps'
outputs joined, as the char LM's 16 sequences): one call on the samples' inputs stacked along
a new axis 0, forward and backward, bit for bit unbatched."""
import numpy as np
import pytest
from batching_cases import assert_unbatched_equal_bit_for_bit, floats, run_lazily

from tape import Variable, ops

SECTIONS = [1, -1, 2]     # (of 6 rows: 1, 3 and 2)


def _sequences(samples: int):
    rng = np.random.default_rng(samples)
    return [Variable(floats(rng, (6, 5)), stop_gradient=False) for _ in range(samples)]


def _build(xs):
    """Each sample's rows cut into steps (the last one unused), each step's output read by a
    batch of elementwise ops, the outputs joined in another order; the joined rows read as
    one batch and one sample at a time."""
    def build():
        joined = []
        for x in xs:
            first, middle, _ = ops.split(x, sections=SECTIONS, axis=-2)
            joined.append(ops.concat([ops.tanh(middle) * middle, ops.exp(first)], axis=0))
        terms = [ops.reshape2(ops.sigmoid(j), shape=[-1]) for j in joined]
        return ops.reduce_sum(ops.concat(terms + [ops.reshape2(joined[0], shape=[-1])], axis=0))
    return build


def _calls(kernel_calls, op_type: str) -> list:
    """The shapes of ``op_type``'s X (a list of them for concat) in each call, sorted."""
    return sorted((arrays["X"].shape if op_type == "split" else [a.shape for a in arrays["X"]]
                   for t, arrays in kernel_calls if t == op_type), key=str)


def test_concat_and_split_along_axis_0_run_stacked_bit_for_bit(kernel_calls):
    xs = _sequences(4)
    build = _build(xs)
    batched = run_lazily(build, xs)
    assert _calls(kernel_calls, "split") == [(4, 6, 5)]
    # concat: the samples' joins, split's gradient (its pieces' gradients, the unused one's
    # zeros, along axis 1) and the loss's lone concat of 5 pieces
    assert _calls(kernel_calls, "concat") == sorted([
        [(4, 1, 5), (4, 3, 5), (4, 2, 5)], [(4, 3, 5), (4, 1, 5)], [(20,)] * 5], key=str)
    assert _calls(kernel_calls, "concat_grad") == sorted([[(4, 3, 5), (4, 1, 5)],
                                                          [(20,)] * 5], key=str)
    assert_unbatched_equal_bit_for_bit(build, xs, batched)


@pytest.mark.parametrize("samples", [2, 3])
def test_too_few_samples_for_units_batch_concat_and_split_bit_for_bit(samples, kernel_calls):
    """Under ``batched_backward._SAMPLES`` samples, backward goes op by op, and split's
    gradients (concat ops along axis 0) batch stacked as forward ops do."""
    xs = _sequences(samples)
    build = _build(xs)
    batched = run_lazily(build, xs)
    assert _calls(kernel_calls, "split") == [(samples, 6, 5)]
    assert [(samples, 1, 5), (samples, 3, 5), (samples, 2, 5)] in _calls(kernel_calls, "concat")
    assert_unbatched_equal_bit_for_bit(build, xs, batched)


def test_values_every_sample_joins_or_cuts_get_every_samples_gradient(kernel_calls):
    """A leaf and a computed value that every sample's concat joins, and a leaf that every
    sample splits: stacked as any other input, their gradients every sample's rows."""
    xs = _sequences(4)
    rng = np.random.default_rng(7)
    start, table = (Variable(floats(rng, shape), stop_gradient=False)
                    for shape in ((2, 5), (4, 5)))

    def build():
        bias = ops.tanh(start)
        terms = []
        for x in xs:
            top, bottom = ops.split(table, num=2, axis=0)
            joined = ops.concat([start, x, bias, top * bottom], axis=0)
            terms.append(ops.reshape2(ops.sigmoid(joined), shape=[-1]))
        return ops.reduce_sum(ops.concat(terms, axis=0))
    batched = run_lazily(build, [start, table, *xs])
    assert _calls(kernel_calls, "split") == [(4, 4, 5)]
    assert [(4, 2, 5), (4, 6, 5), (4, 2, 5), (4, 2, 5)] in _calls(kernel_calls, "concat")
    assert_unbatched_equal_bit_for_bit(build, [start, table, *xs], batched)
