"""tape.static.prune: the seed design's algorithm over is_target ops and fetched variables."""
import numpy as np
import pytest

import tape
import tape.static as static
from tape.attribute import BLOCK
from tape.desc import BlockDesc, OpDesc, VarDesc
from tape.static.program import OPTIMIZE, append_checkpoint

X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)


def _two_heads():
    """feed x -> a = relu(x) -> fetch a (col 0); b = tanh(x) -> c = exp(b) -> fetch c (col 1)."""
    def fn(x):
        a = tape.ops.relu(x)
        return a, tape.ops.exp(tape.ops.tanh(x))
    return static.trace(fn, tape.Variable(X, name="x"))


def _types(desc):
    return [op.type for op in desc.global_block().ops]


def test_a_variable_target_keeps_only_the_ops_it_needs():
    program = _two_heads()
    a, c = program.fetch_names
    pruned = static.prune(program, [c])
    assert _types(pruned.desc) == ["feed", "tanh", "exp", "fetch"]
    assert pruned.fetch_names == [c] and pruned.scope is program.scope
    tanh_out = pruned.global_block().ops[1].output("Out")[0]
    assert set(pruned.global_block().vars) == {"feed", "x", tanh_out, c, "fetch"}
    assert _types(static.prune(program, a).desc) == ["feed", "relu", "fetch"]


def test_prune_does_not_change_its_input():
    program = _two_heads()
    before = str(program.desc)
    static.prune(program.desc, [program.fetch_names[0]])
    assert str(program.desc) == before
    assert not any(op.is_target for op in program.global_block().ops)


def test_a_variable_without_a_fetch_op_gets_one_that_is_a_target():
    program = _two_heads()
    hidden = program.global_block().ops[2].output("Out")[0]     # tanh's output
    pruned = static.prune(program.desc, [hidden])
    fetch = pruned.global_block().ops[-1]
    assert _types(pruned) == ["feed", "tanh", "fetch"]
    assert fetch.input("X") == [hidden] and fetch.attrs["col"] == 2 and fetch.is_target


def test_an_op_target_keeps_what_it_reads(tmp_path):
    program = _two_heads()
    save = append_checkpoint(program, str(tmp_path / "ckpt"))   # no persistables: X is empty
    pruned = static.prune(program.desc, [save])
    assert _types(pruned) == ["save_combine"]
    writer = OpDesc("save_combine", {"X": [program.fetch_names[1]]}, {},
                    {"file_path": str(tmp_path / "c")})
    program.global_block().append_op(writer)
    assert _types(static.prune(program.desc, [writer])) == ["feed", "tanh", "exp",
                                                            "save_combine"]


def test_ops_already_marked_as_targets_count():
    program = _two_heads()
    program.global_block().ops[1].is_target = True      # relu
    assert _types(static.prune(program.desc, [])) == ["feed", "relu"]


def test_an_optimizer_op_runs_only_as_a_target():
    """It writes a parameter that forward ops read; that must not pull it into a forward run."""
    desc = static.trace(lambda x: tape.ops.relu(x), X).desc
    block = desc.global_block()
    block.add_var(VarDesc("w", (4,), persistable=True))
    block.add_var(VarDesc("lr", (1,), persistable=True))
    block.ops.insert(1, OpDesc("scale", {"X": ["w"]}, {"Out": ["x2"]}, {"scale": 2.0}))
    block.add_var(VarDesc("x2", (4,)))
    update = block.append_op(OpDesc("sgd", {"Param": ["w"], "LearningRate": ["lr"],
                                            "Grad": ["w"]}, {"ParamOut": ["w"]},
                                    {"op_role": OPTIMIZE}))
    assert _types(static.prune(desc, ["x2"])) == ["scale", "fetch"]
    assert _types(static.prune(desc, ["x2", update])) == ["scale", "sgd", "fetch"]


def test_an_op_with_a_sub_block_keeps_what_the_sub_block_reads():
    desc = static.trace(lambda x: tape.ops.relu(x), X).desc
    block = desc.global_block()
    inner = BlockDesc(1, 0)
    inner.append_op(OpDesc("tanh", {"X": [block.ops[1].output("Out")[0]]}, {"Out": ["t"]}))
    desc.blocks.append(inner)
    loop = OpDesc("while_like", {}, {"Out": ["done"]}, {"sub_block": 1},
                  attr_types={"sub_block": BLOCK})
    block.append_op(loop)
    block.add_var(VarDesc("done", ()))
    assert _types(static.prune(desc, [loop])) == ["feed", "relu", "while_like"]


def test_unknown_targets_are_errors():
    program = _two_heads()
    with pytest.raises(tape.NotFoundError, match="not an op of block 0"):
        static.prune(program, [OpDesc("relu")])
    with pytest.raises(tape.NotFoundError, match="does not declare"):
        static.prune(program, ["nowhere"])
    with pytest.raises(tape.InvalidArgumentError, match="received int"):
        static.prune(program, [3])
