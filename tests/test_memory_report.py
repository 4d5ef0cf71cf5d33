"""tape.memory_report(): what the global tape keeps alive for backward, op by op."""
import numpy as np

import tape
from tape import layers


def f32(*shape):
    return np.ones(shape, np.float32)


def test_an_mlp_keeps_what_its_grad_ops_read():
    l1, l2 = layers.Linear(3, 5, act="relu"), layers.Linear(5, 2)
    x = tape.Variable(f32(4, 3), name="x")
    hidden = l1(x)
    tape.ops.mean(l2(hidden))
    report = tape.memory_report()
    rows = [(r.op_type, r.grad_ops, r.kept) for r in report.rows]
    assert rows == [
        ("mul", ("mul_grad",), (("X", "x"), ("Y", l1.w.name))),
        ("elementwise_add", ("elementwise_add_grad",), (("Y", f"{l1.b.name} (leaf)"),)),
        ("relu", ("relu_grad",), (("Out", hidden.name),)),
        ("mul", ("mul_grad",), (("X", hidden.name), ("Y", l2.w.name))),
        ("elementwise_add", ("elementwise_add_grad",), (("Y", f"{l2.b.name} (leaf)"),)),
        ("mean", ("mean_grad",), ()),
    ]
    # relu's output is also the second mul's X: counted once, under the op that holds it first
    assert [r.bytes for r in report.rows] == [4 * 3 * 4 + 3 * 5 * 4, 5 * 4, 4 * 5 * 4,
                                              5 * 2 * 4, 2 * 4, 0]
    assert report.total_bytes == sum(r.bytes for r in report.rows)
    assert report.arrays == 6


def test_backward_releases_everything():
    layer = layers.Linear(3, 2, act="tanh")
    loss = tape.ops.mean(layer(tape.Variable(f32(4, 3))))
    assert tape.memory_report().total_bytes > 0
    loss.backward()
    report = tape.memory_report()
    assert report.rows == [] and report.total_bytes == 0


def test_an_array_held_through_several_handles_or_views_counts_once():
    base = np.ones((10, 3), np.float32)
    w = tape.Variable(f32(3, 3), stop_gradient=False)
    x = tape.Variable(base[:2])            # a view: keeping it keeps all of base
    tape.ops.mul(x, w)
    tape.ops.mul(x, w)
    report = tape.memory_report()
    assert [r.bytes for r in report.rows] == [base.nbytes + w.value().nbytes, 0]
    assert report.arrays == 2


def test_ops_whose_gradients_read_nothing_hold_nothing():
    x = tape.Variable(f32(2, 3), stop_gradient=False)
    y = tape.ops.scale(tape.ops.elementwise_add(x, x), scale=2.0)
    tape.ops.reduce_sum(y)
    report = tape.memory_report()
    assert [(r.op_type, r.grad_ops, r.bytes) for r in report.rows] == [
        ("elementwise_add", ("elementwise_add_grad",), x.value().nbytes),
        ("scale", ("scale",), 0), ("reduce_sum", ("reduce_sum_grad",), 0)]


def test_the_table_reads_well():
    layer = layers.Linear(256, 256, act="relu")
    tape.ops.mean(layer(tape.Variable(f32(64, 256), name="batch")))
    lines = str(tape.memory_report()).splitlines()
    assert lines[0].split() == ["#", "op", "grad", "op", "keeps", "bytes"]
    assert lines[1].split() == ["0", "mul", "mul_grad", "X=batch,", f"Y={layer.w.name}",
                                "320.0", "KiB"]
    assert lines[-1] == "total: 385.0 KiB in 4 array(s), held by 4 recorded op(s)"
