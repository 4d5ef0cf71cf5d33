"""Control flow in programs: tape.static.nn.while_loop / cond eager (Python control flow on the
tape) and traced (``while``, ``conditional_block``, ``select_input`` sub-blocks), and the
Executor's ops on the scope (tensor arrays, select_output) in hand-written programs."""
import pathlib
import re

import numpy as np
import pytest

import tape
from tape import dtypes, layers
from tape.desc import DENSE_TENSOR_ARRAY, OpDesc, ProgramDesc, VarDesc
from tape.testing import check_function_grad

nn = tape.static.nn


def counter(value=0):
    return tape.ops.fill_constant(shape=[1], dtype=dtypes.INT64, value=float(value))


def loop_then_branch(lin):
    """Apply ``lin`` n times to x, then a branch on the result's mean."""
    def fn(x, n):
        _, s = nn.while_loop(lambda i, s: i < n, lambda i, s: [tape.ops.increment(i), lin(s)],
                             [counter(), x])
        return nn.cond(s.mean() > 0, lambda: s - 1.0, lambda: s * 3.0)
    return fn


def python_loop_then_branch(lin, x, n, branches=None):
    s = tape.Variable(x)
    for _ in range(n):
        s = lin(s)
    taken = bool(s.numpy().mean() > 0)
    if branches is not None:
        branches.add(taken)
    return (s - 1.0 if taken else s * 3.0).numpy()


def test_eager_while_loop_and_cond_match_python():
    lin = layers.Linear(3, 3, act="tanh")
    fn = loop_then_branch(lin)
    x = np.array([[0.5, -0.2, 0.9], [1.0, 0.3, -0.4]], np.float32)
    for n in (0, 1, 4):
        for sign in (1, -1):
            got = fn(tape.Variable(sign * x), tape.Variable(np.array([n]))).numpy()
            np.testing.assert_array_equal(got, python_loop_then_branch(lin, sign * x, n))
    i, total = nn.while_loop(lambda i, t: i < 5, lambda i, t: [i + 1.0, t + i],
                             [tape.Variable(np.float32(0)), tape.Variable(np.float32(0))])
    assert (float(i), float(total)) == (5.0, 10.0)
    assert nn.cond(tape.Variable(np.array([False])), lambda: 1, lambda: 2) == 2
    assert nn.cond(tape.Variable(np.array(True)), lambda: None) is None


def test_gradients_through_eager_control_flow_match_central_differences():
    def fn(x, w):
        _, y = nn.while_loop(lambda i, y: i < 3, lambda i, y: [tape.ops.increment(i),
                                                            (y @ w).tanh()], [counter(), x])
        return nn.cond(y.sum() > 0, lambda: y * y, lambda: y.exp())
    rng = np.random.default_rng(0)
    for sign in (1, -1):
        check_function_grad(fn, sign * np.abs(rng.standard_normal((2, 3))),
                            np.eye(3) + 0.1 * rng.standard_normal((3, 3)))


def test_trace_records_sub_blocks_that_take_other_paths():
    """The example runs the loop 3 times and takes the true branch; the program must loop as
    often as n says and take either branch (a trace that froze one path fails here)."""
    tape.seed(1)
    lin = layers.Linear(3, 3, act="tanh")
    fn = loop_then_branch(lin)
    x = np.array([[0.5, -0.2, 0.9], [1.0, 0.3, -0.4]], np.float32)
    program = tape.static.trace(fn, x, np.array([3]))
    types = [op.type for op in program.global_block().ops]
    assert {"while", "conditional_block", "select_input", "logical_not"} <= set(types)
    assert len(program.desc.blocks) == 4
    exe = tape.static.Executor()
    branches = set()
    for xx, n in ((x, 3), (-x, 1), (x, 0), (-x, 0), (0.1 * x, 5), (-x, 6)):
        got = exe.run(program, {"input_0": xx, "input_1": np.array([n])},
                      program.fetch_names)[0]
        expected = python_loop_then_branch(lin, xx, n, branches)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert branches == {True, False}
    assert exe.last_run_ops.count("while") == 1


def test_nested_control_flow_traces():
    """A cond inside a while body, a while inside a cond branch."""
    def fn(x):
        def body(i, y):
            y = nn.cond(y.sum() > 1.0, lambda: y * 0.5, lambda: y + 1.0)
            return [tape.ops.increment(i), y]
        _, y = nn.while_loop(lambda i, y: i < 4, body, [counter(), x])

        def halve_until_small():
            return nn.while_loop(lambda z: z.sum() > 0.5, lambda z: z * 0.5, [y])[0]
        return nn.cond(y.mean() > 0.2, halve_until_small, lambda: y - 1.0)

    x = np.array([0.3, -0.1], np.float32)
    program = tape.static.trace(fn, x)
    assert len(program.desc.blocks) == 7   # block 0, while + 2 branches, 2 branches + while
    assert {b.parent_idx for b in program.desc.blocks[1:]} >= {0, 1}
    exe = tape.static.Executor()
    for xx in (x, np.array([3.0, 2.0], np.float32), np.array([-5.0, -4.0], np.float32)):
        got = exe.run(program, {"input_0": xx}, program.fetch_names)[0]
        np.testing.assert_allclose(got, fn(tape.Variable(xx)).numpy(), rtol=1e-6)


def test_bad_control_flow_is_reported():
    x = tape.Variable(np.ones(2, np.float32))
    with pytest.raises(tape.InvalidArgumentError, match="bool Variable with one element"):
        nn.while_loop(lambda v: v, lambda v: v, [x])
    with pytest.raises(tape.InvalidArgumentError, match="body must return 1 Variable"):
        nn.while_loop(lambda v: v.sum() > 0, lambda v: [v, v], [x])
    with pytest.raises(tape.InvalidArgumentError, match="same structure"):
        tape.static.trace(lambda v: nn.cond(v.sum() > 0, lambda: v, lambda: [v, v]), x)
    with pytest.raises(tape.InvalidArgumentError, match="same dtype and rank"):
        tape.static.trace(lambda v: nn.cond(v.sum() > 0, lambda: v, lambda: v.sum()), x)


def _array_program():
    """x -> write_to_array at 0 and 1 (x, 2x) -> lod_array_length, read_from_array(1); and
    select_output routing x to one of two variables by mask."""
    p = ProgramDesc()
    b = p.global_block()
    for name, shape, dtype in (("x", (2,), dtypes.FP32), ("i0", (1,), dtypes.INT64),
                               ("i1", (1,), dtypes.INT64), ("x2", (2,), dtypes.FP32),
                               ("n", (1,), dtypes.INT64), ("second", (2,), dtypes.FP32),
                               ("mask", (1,), dtypes.INT32), ("a", (2,), dtypes.FP32),
                               ("b", (2,), dtypes.FP32)):
        b.add_var(VarDesc(name, shape, dtype))
    b.add_var(VarDesc("arr", (2,), dtypes.FP32, type=DENSE_TENSOR_ARRAY))
    ops = [("fill_constant", {}, {"Out": ["i0"]}, {"shape": [1], "dtype": dtypes.INT64,
                                                   "value": 0.0}),
           ("increment", {"X": ["i0"]}, {"Out": ["i1"]}, {"step": 1.0}),
           ("scale", {"X": ["x"]}, {"Out": ["x2"]}, {"scale": 2.0}),
           ("write_to_array", {"X": ["x"], "I": ["i0"]}, {"Out": ["arr"]}, {}),
           ("write_to_array", {"X": ["x2"], "I": ["i1"]}, {"Out": ["arr"]}, {}),
           ("lod_array_length", {"X": ["arr"]}, {"Out": ["n"]}, {}),
           ("read_from_array", {"X": ["arr"], "I": ["i1"]}, {"Out": ["second"]}, {}),
           ("fill_constant", {}, {"Out": ["a"]}, {"shape": [2], "dtype": dtypes.FP32,
                                                  "value": -1.0}),
           ("fill_constant", {}, {"Out": ["b"]}, {"shape": [2], "dtype": dtypes.FP32,
                                                  "value": -1.0}),
           ("select_output", {"X": ["x"], "Mask": ["mask"]}, {"Out": ["a", "b"]}, {})]
    for op_type, ins, outs, attrs in ops:
        b.append_op(OpDesc(op_type, ins, outs, attrs))
    return tape.static.Program(p, feed_names=["x", "mask"], fetch_names=[])


def test_tensor_array_ops_and_select_output():
    program = _array_program()
    x = np.array([1.5, -2.0], np.float32)
    exe = tape.static.Executor()
    n, second, a, b = exe.run(program, {"x": x, "mask": np.array([1], np.int32)},
                              ["n", "second", "a", "b"])
    assert n.tolist() == [2]
    np.testing.assert_array_equal(second, 2 * x)
    np.testing.assert_array_equal(a, [-1.0, -1.0])
    np.testing.assert_array_equal(b, x)
    bad = program.global_block().ops[6]
    bad.inputs["I"] = ["n"]     # index 2 of a 2-entry array
    with pytest.raises(tape.InvalidArgumentError, match="read_from_array: I is 2"):
        exe.run(program, {"x": x, "mask": np.array([0], np.int32)}, ["second"])
    with pytest.raises(tape.InvalidArgumentError, match="select_output: Mask is 3"):
        exe.run(program, {"x": x, "mask": np.array([3], np.int32)}, ["a"])


# ---- static backward: while_grad and conditional_block_grad ----

def _loop_branch_loss(lin):
    def fn(x, n):
        _, s = nn.while_loop(lambda i, s: i < n, lambda i, s: [tape.ops.increment(i), lin(s)],
                             [counter(), x])
        return tape.ops.mean(nn.cond(s.mean() > 0, lambda: s * s, lambda: s * 3.0))
    return fn


def _central_difference(exe, program, feed, loss, name, direction, h=1e-6):
    """``<d loss / d name, direction>`` by float64 central differences of the program's run,
    ``name`` a persistable value in the program's scope or a feed."""
    def at(step):
        moved = dict(feed)
        holder = program.scope.find_var(name)
        original = holder.value if name not in feed else None
        if name in feed:
            moved[name] = feed[name] + step * direction
        else:
            holder.value = original + step * direction
        try:
            return float(exe.run(program, moved, [loss])[0])
        finally:
            if original is not None:
                holder.value = original
    return (at(h) - at(-h)) / (2 * h)


def test_static_gradients_through_while_and_cond_match_eager_and_central_differences():
    tape.seed(3)
    lin = layers.Linear(3, 3, act="tanh", dtype="float64")
    fn = _loop_branch_loss(lin)
    x = np.array([[0.5, -0.2, 0.9], [1.0, 0.3, -0.4]])
    program = tape.static.trace(fn, x, np.array([3]))
    program.global_block().vars["input_0"].stop_gradient = False    # d loss / d x too
    loss = program.fetch_names[0]
    pairs = tape.static.append_backward(program, loss)
    types = {op.type for op in program.global_block().ops}
    assert {"while_grad", "conditional_block_grad", "select_output"} <= types
    exe = tape.static.Executor()
    rng = np.random.default_rng(1)
    names = [p for p, _ in pairs] + ["input_0"]
    fetch = [g for _, g in pairs] + ["input_0@GRAD"]
    for xx, n in ((x, 3), (-x, 2), (x, 0), (0.2 * x, 1)):
        feed = {"input_0": xx, "input_1": np.array([n])}
        grads = dict(zip(names, exe.run(program, feed, fetch)))
        for name, grad in grads.items():    # static == float64 central differences
            direction = rng.uniform(-1, 1, grad.shape)
            numeric = _central_difference(exe, program, feed, loss, name, direction)
            analytic = float(np.sum(grad * direction))
            assert abs(analytic - numeric) <= 1e-7 * max(1.0, abs(numeric)), (name, n)
        tape.reset_global_tape()    # static == eager
        xv = tape.Variable(xx, stop_gradient=False)
        out = fn(xv, tape.Variable(np.array([n])))
        out.backward()
        for p in lin.params():
            eager = np.zeros_like(grads[p.name]) if p.grad is None else p.grad.numpy()
            np.testing.assert_allclose(grads[p.name], eager, rtol=1e-12, atol=1e-15)
            p.grad = None
        np.testing.assert_allclose(grads["input_0"], xv.grad.numpy(), rtol=1e-12)


def test_static_gradient_of_nested_control_flow():
    """A cond inside a while body (its gradient block inside the loop's)."""
    w = tape.Variable(np.array([[0.9, -0.3], [0.2, 0.7]]), name="w_nested", stop_gradient=False)
    w.desc.persistable = True

    def fn(x):
        def body(i, y):
            y = nn.cond(y.sum() > 0, lambda: (y @ w).tanh(), lambda: y @ w * 0.5)
            return [tape.ops.increment(i), y]
        return tape.ops.mean(nn.while_loop(lambda i, y: i < 3, body, [counter(), x])[1])

    x = np.array([[0.4, -0.6]])
    program = tape.static.trace(fn, x)
    loss = program.fetch_names[0]
    ((name, grad_name),) = tape.static.append_backward(program, loss)
    exe = tape.static.Executor()
    for xx in (x, -x, np.array([[2.0, 1.0]])):
        (grad,) = exe.run(program, {"input_0": xx}, [grad_name])
        direction = np.random.default_rng(2).uniform(-1, 1, grad.shape)
        numeric = _central_difference(exe, program, {"input_0": xx}, loss, name, direction)
        assert abs(float(np.sum(grad * direction)) - numeric) <= 1e-7 * max(1.0, abs(numeric))


def test_readme_control_flow_example_runs():
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("### Loops and branches")
    section = re.split(r"\n##+ ", readme[start:])[0]     # up to the next heading
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    scope = {"tape": tape}
    exec(compile(block, "README.md", "exec"), scope)
    cell, x = scope["cell"], scope["x"]
    expected = python_refine(cell, x, 7)
    np.testing.assert_allclose(scope["out"], expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(scope["eager"].numpy(), python_refine(cell, x, 3), rtol=1e-6)


def python_refine(cell, x, steps):
    h = tape.Variable(x)
    for _ in range(steps):
        h = cell(h)
    return (h * 2.0 if h.numpy().mean() > 0 else -h).numpy()


def test_prune_keeps_sub_blocks_sound(tmp_path):
    """A fetch that needs the loop keeps it and everything its block reads; one that does not
    drops the loop and empties its block, and the rest still saves and runs."""
    tape.seed(2)
    lin = layers.Linear(3, 3, act="tanh")

    def fn(x, n):
        _, s = nn.while_loop(lambda i, s: i < n, lambda i, s: [tape.ops.increment(i), lin(s)],
                             [counter(), x])
        return s, x * 2.0
    x = np.array([[0.5, -0.2, 0.9]], np.float32)
    program = tape.static.trace(fn, x, np.array([2]))
    looped, doubled = program.fetch_names
    kept = tape.static.prune(program, [looped])
    assert "while" in [op.type for op in kept.global_block().ops]
    assert {p.name for p in lin.params()} <= set(kept.global_block().vars)
    assert kept.desc.blocks[1].ops
    without = tape.static.prune(program, [doubled])
    assert "while" not in [op.type for op in without.global_block().ops]
    assert without.desc.blocks[1].ops == [] and without.desc.blocks[1].vars == {}
    tape.static.save_inference_model(tmp_path, program, fetch_names=[doubled])
    reloaded = tape.static.load_inference_model(tmp_path)
    (got,) = tape.static.Executor().run(reloaded, {"input_0": x, "input_1": np.array([2])},
                                        reloaded.fetch_names)
    np.testing.assert_array_equal(got, 2 * x)


def _while_program(condition_shape):
    """block 0: while (Condition c) over block 1, which reads 'never_written'."""
    p = ProgramDesc()
    b = p.global_block()
    b.add_var(VarDesc("c", condition_shape, dtypes.BOOL))
    b.add_var(VarDesc("y", (2,), dtypes.FP32))
    b.add_var(VarDesc("never_written", (2,), dtypes.FP32))
    p.blocks.append(tape.desc.BlockDesc(1, 0))
    p.blocks[1].append_op(OpDesc("assign", {"X": ["never_written"]}, {"Out": ["y"]}))
    b.append_op(OpDesc("while", {"X": ["never_written"], "Condition": ["c"]},
                       {"Out": ["y"], "StepScopes": []}, {"sub_block": 1}))
    return tape.static.Program(p, feed_names=["c"], fetch_names=[])


def test_control_flow_errors_name_the_op():
    exe = tape.static.Executor()
    program = _while_program((2,))
    with pytest.raises(tape.NotFoundError, match=r"op #1 \(while\) reads 'never_written'"):
        exe.run(program, {"c": np.array([True, False])}, ["y"])     # checked before running
    with pytest.raises(tape.InvalidArgumentError, match="one bool element, received shape"):
        exe.run(program, {"c": np.array([True, False]), "never_written": np.ones(2, "f4")},
                ["y"])
    program = _while_program((1,))
    program.global_block().ops[0].inputs["X"] = []
    with pytest.raises(tape.NotFoundError, match=r"op #0 \(assign\) reads \['never_written'\]"):
        exe.run(program, {"c": np.array([True])}, ["y"])
    program.global_block().ops[0].attrs["sub_block"] = 7
    with pytest.raises(tape.NotFoundError, match="names block 7"):
        exe.run(program, {"c": np.array([True])}, ["y"])
