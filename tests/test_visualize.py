"""Graph pictures: the forward and backward tapes and static programs as Graphviz sources, with
the nodes and edges the design draws; files written by tape.visualize."""
import re
import shutil

import numpy as np

import tape
import tape.static as static
from tape import layers, optim
from tape.static import to_dot


def _mlp_loss():
    tape.reset_global_tape()
    layer = layers.Linear(3, 2, act="relu")
    return layer, tape.ops.mean(layer(tape.Variable(np.ones((4, 3), np.float32))))


def _ops(dot):
    return {m.group(1): m.group(2) for m in re.finditer(r'(op_\d+) \[label="\{type: (\w+)', dot)}


def test_the_tape_picture_has_both_tapes_slots_variables_and_grad_edges():
    layer, loss = _mlp_loss()
    dot = to_dot(tape.get_global_tape(), loss)
    forward, backward = dot.split('label="backward tape"')
    assert 'label="forward tape"' in forward
    assert list(_ops(forward).values()) == ["mul", "elementwise_add", "relu", "mean"]
    assert list(_ops(backward).values()) == ["fill_constant", "mean_grad", "relu_grad",
                                             "elementwise_add_grad", "mul_grad"]
    w, b = layer.w.name, layer.b.name
    assert f"<i1>Y: {w}" in forward                      # record-shaped, with its slots
    assert f'op_0:i1 -> "{w}"' in dot and f'op_7:o1 -> "{b}@GRAD"' in dot
    for p in (w, b):
        assert f'"{p}" [shape=box];' in dot
        assert f'"{p}" -> "{p}@GRAD" [label="Grad()", style=dashed];' in dot
    loss.backward()                                      # drawing left the tape intact
    assert layer.w.grad is not None


def test_without_a_loss_only_the_forward_tape():
    _, loss = _mlp_loss()
    dot = to_dot(tape.get_global_tape())
    assert "backward tape" not in dot and "Grad()" not in dot and len(_ops(dot)) == 4


def test_program_to_dot_draws_a_static_program_with_its_training_ops():
    layer = layers.Linear(3, 2)
    program = static.trace(lambda x: tape.ops.mean(layer(x)), np.ones((4, 3), np.float32))
    assert list(_ops(program.to_dot()).values()) == ["feed", "mul", "elementwise_add", "mean",
                                                     "fetch"]
    optim.SGD(0.1).minimize(program.fetch_names[0], program)
    dot = program.to_dot()
    assert 'label="optimizer"' in dot and list(_ops(dot.split('"optimizer"')[1]).values()) == [
        "sgd", "sgd"]
    assert f'"{layer.w.name}" -> "{layer.w.name}@GRAD" [label="Grad()"' in dot


def test_visualize_writes_a_dot_file_and_a_picture_when_graphviz_is_there(tmp_path):
    _, loss = _mlp_loss()
    written = tape.visualize(loss, str(tmp_path / "pics" / "mlp.dot"))
    assert written[0].read_text().startswith("digraph")
    if shutil.which("dot"):
        assert written[1].suffix == ".svg" and "<svg" in written[1].read_text()
    else:
        assert len(written) == 1
