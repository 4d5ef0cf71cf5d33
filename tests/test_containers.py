"""Parameters and layers held in lists, tuples, dicts and the containers are registered:
params(), named_parameters(), state_dict(), to(), train()/eval(), training; Paddle's names."""
import re

import numpy as np
import pytest

import tape
from tape import layers, optim


class Gates(layers.Layer):
    """The issue's case: parameters in a plain list."""

    def __init__(self):
        self.W = [self.create_parameter((3, 2)) for _ in "iou"]
        self.b = self.create_parameter((2,), is_bias=True)

    def __call__(self, x):
        out = None
        for w in self.W:
            y = tape.ops.matmul_v2(x, w)
            out = y if out is None else tape.ops.elementwise_add(out, y)
        return tape.ops.elementwise_add(out, self.b)


class Holder(layers.Layer):
    def __init__(self):
        self.pair = (layers.Linear(2, 2), layers.Dropout(0.5))
        self.by_name = {"a": layers.Linear(2, 3), "nested": [layers.BatchNorm(3)]}
        self.blocks = layers.LayerList([layers.Linear(2, 2) for _ in range(2)])
        self.weights = layers.ParameterList([self.create_parameter((2,)) for _ in range(2)])
        self.table = layers.ParameterDict({"x": self.create_parameter((4,))})


def test_parameters_in_a_plain_list_are_registered_and_trained():
    layer = Gates()
    assert layer.params() == [*layer.W, layer.b]
    assert list(layer.state_dict()) == ["W.0", "W.1", "W.2", "b"]
    before = [w.value().copy() for w in layer.W]
    tape.ops.mean(layer(tape.Variable(np.ones((4, 3), np.float32)))).backward()
    optim.SGD(0.1)(layer.params())
    assert all(not np.array_equal(w.value(), old) for w, old in zip(layer.W, before))


def test_parameters_are_named_per_layer_as_paddle_does():
    layer = Gates()
    prefix = re.fullmatch(r"(gates_\d+)\.w_0", layer.W[0].name).group(1)
    assert [p.name for p in layer.params()] == [f"{prefix}.w_0", f"{prefix}.w_1",
                                                f"{prefix}.w_2", f"{prefix}.b_0"]
    assert layer.full_name() == prefix

    class MyBlock(layers.Layer):
        def __init__(self):
            self.w = self.create_parameter((2,))
    assert re.fullmatch(r"my_block_\d+\.w_0", MyBlock().w.name)


def test_lists_tuples_dicts_and_containers_take_part_in_everything():
    model = Holder()
    keys = list(model.state_dict())
    assert keys == ["pair.0.w", "pair.0.b", "by_name.a.w", "by_name.a.b",
                    "by_name.nested.0.weight", "by_name.nested.0.bias", "by_name.nested.0.mean",
                    "by_name.nested.0.variance", "blocks.0.w", "blocks.0.b", "blocks.1.w",
                    "blocks.1.b", "weights.0", "weights.1", "table.x"]
    assert list(Gates().state_dict()) == ["W.0", "W.1", "W.2", "b"]
    named = dict(model.named_parameters())
    assert list(named) == [k for k in keys if not k.endswith(("mean", "variance"))]
    assert model.parameters() == list(named.values()) == model.params()
    assert model.parameters(include_sublayers=False) == []
    assert model.weights.parameters(include_sublayers=False) == list(model.weights)
    assert [k for k, _ in model.named_parameters(prefix="m")][:1] == ["m.pair.0.w"]
    model.eval()
    assert not model.pair[1].training and not model.by_name["nested"][0].training
    assert not model.blocks[1].training
    model.train()
    assert model.pair[1].training and model.blocks[0].training


def test_state_dict_round_trip_through_containers():
    first, second = Holder(), Holder()
    second.load_state_dict(first.state_dict())
    for (k1, a), (k2, b) in zip(first.state_dict().items(), second.state_dict().items()):
        assert k1 == k2
        np.testing.assert_array_equal(a, b)


def test_to_moves_what_containers_hold(monkeypatch):
    moved = []
    monkeypatch.setattr(tape.Variable, "to", lambda self, place: moved.append(self.name))
    model = Holder()
    model.to(tape.CPUPlace())
    assert moved == [v.name for v in model.state_dict(keep_vars=True).values()]


def test_a_variable_held_twice_is_listed_once():
    class Tied(layers.Layer):
        def __init__(self):
            self.embed = layers.Embedding(5, 3)
            self.out = [self.embed.weight]
    model = Tied()
    assert model.params() == [model.embed.weight]
    assert list(model.state_dict()) == ["embed.weight"]


def test_rnn_state_dict_keeps_paddles_keys():
    gru = layers.GRU(3, 4)
    assert list(gru.state_dict()) == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                      "bias_hh_l0"]
    assert len(gru.params()) == 4


def test_layer_list_operations():
    blocks = layers.LayerList([layers.Linear(2, 2)])
    blocks.append(layers.Linear(2, 3)).extend([layers.Linear(3, 3)])
    blocks.insert(0, layers.Dropout(0.1))
    assert len(blocks) == 4 and isinstance(blocks[0], layers.Dropout)
    assert isinstance(blocks[1:], layers.LayerList) and len(blocks[1:]) == 3
    blocks[0] = layers.Linear(2, 2)
    assert len(blocks.params()) == 8
    x = tape.Variable(np.ones((1, 2), np.float32))
    for block in blocks[1:]:
        x = block(x)
    assert x.shape == (1, 3)


def test_containers_reject_what_they_cannot_hold():
    with pytest.raises(tape.InvalidArgumentError, match="LayerList: expected a Layer, received "
                                                        "int"):
        layers.LayerList([1])
    with pytest.raises(tape.InvalidArgumentError, match="ParameterList: expected a parameter"):
        layers.ParameterList([tape.Variable(np.ones(2))])
    with pytest.raises(tape.InvalidArgumentError, match="ParameterDict: keys must be str"):
        layers.ParameterDict({1: Gates().b})
    table = layers.ParameterDict()
    table["w"] = Gates().b
    assert "w" in table and list(table) == ["w"] and len(table.values()) == 1
