"""DyNet-style RNN builders: states step by step, 1-D and batched inputs, transduce, the same
numbers as the cells run by hand, gradients reach every layer, and export."""
import numpy as np
import pytest

import tape
import tape.static as static
from tape import layers

RNG = np.random.default_rng(4)
XS = RNG.standard_normal((3, 2, 4)).astype(np.float32)     # (time, batch, input)
BUILDERS = [layers.LSTMBuilder, layers.GRUBuilder, layers.SimpleRNNBuilder]


def _by_hand(builder, xs):
    """The top outputs of the builder's cells run by hand over ``xs`` (time, batch, input)."""
    states, outputs = [None] * len(builder.cells), []
    for x in xs:
        x = tape.Variable(x)
        for i, cell in enumerate(builder.cells):
            states[i] = cell(x, states[i])
            x = states[i][0] if isinstance(states[i], tuple) else states[i]
        outputs.append(x.numpy())
    return outputs


@pytest.mark.parametrize("make", BUILDERS)
def test_transduce_equals_the_cells_stacked_by_hand(make):
    b = make(2, 4, 3)
    got = [y.numpy() for y in b.transduce([tape.Variable(x) for x in XS])]
    for a, w in zip(got, _by_hand(b, XS), strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-6)
        assert a.shape == (2, 3)


@pytest.mark.parametrize("make", BUILDERS)
def test_a_1d_input_is_one_example(make):
    b = make(2, 4, 3)
    s = b.initial_state()
    assert s.output() is None and s.h() == []
    for x in XS[:, 0]:
        s = s.add_input(tape.Variable(x))
    assert s.output().shape == (3,) and [h.shape for h in s.h()] == [(3,), (3,)]
    assert len(s.s()) == (4 if make is layers.LSTMBuilder else 2)
    assert s.prev().prev().prev() is not None and s.prev().prev().prev().output() is None
    np.testing.assert_allclose(s.output().numpy(), _by_hand(b, XS[:, :1])[-1][0], rtol=1e-6)
    np.testing.assert_allclose(s.h()[-1].numpy(), s.output().numpy())


def test_lstm_state_orders_memories_then_outputs_as_dynet():
    b = layers.LSTMBuilder(2, 4, 3)
    s = b.initial_state().add_input(tape.Variable(XS[0]))
    c0, c1, h0, h1 = s.s()
    assert h1 is s.output()
    assert not np.array_equal(c1.numpy(), h1.numpy())


@pytest.mark.parametrize("make", BUILDERS)
def test_gradients_reach_every_parameter_and_the_builder_registers_them(make):
    b = make(2, 4, 3)
    assert len(b.params()) == 8 and list(b.state_dict())[:2] == ["cells.0.weight_ih",
                                                                 "cells.0.weight_hh"]
    tape.reset_global_tape()
    loss = tape.ops.mean(tape.ops.sum(b.transduce([tape.Variable(x) for x in XS])))
    loss.backward()
    assert all(p.grad is not None and np.any(p.grad.numpy() != 0) for p in b.params())


def test_inputs_are_checked():
    b = layers.GRUBuilder(1, 4, 3)
    s = b.initial_state().add_input(tape.Variable(XS[0, 0]))
    with pytest.raises(tape.InvalidArgumentError, match=r"GRUBuilder: expected x of shape "
                                                        r"\(4,\) or \(batch, 4\)"):
        s.add_input(tape.Variable(XS[0]))
    with pytest.raises(tape.InvalidArgumentError, match="num_layers must be >= 1"):
        layers.LSTMBuilder(0, 4, 3)


@pytest.mark.parametrize("make", BUILDERS)
def test_a_builder_exports(make, tmp_path):
    b = make(2, 4, 3)
    program = static.trace(lambda *xs: b.transduce(xs)[-1], *XS)
    static.save_inference_model(tmp_path, program)
    loaded = static.load_inference_model(tmp_path)
    (got,) = static.Executor().run(loaded, dict(zip(loaded.feed_names, XS)),
                                   loaded.fetch_names)
    np.testing.assert_allclose(got, _by_hand(b, XS)[-1], rtol=1e-6)
