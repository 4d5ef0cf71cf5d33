"""tape.distributed in one process: backward's grad-ready hook, shard's DistributedSampler
semantics, DataParallel and tape.static.data_parallel in a world of one (test_mpi.py runs them
on 2 and 3 ranks)."""
import os
import re

import numpy as np
import pytest

import tape
from tape import backward, distributed, layers, optim, static
from tape import functional as F
from tape.desc import ProgramDesc
from tape.optim.clip import ClipGradByGlobalNorm


def _net(seed=0):
    tape.seed(seed)
    return layers.Sequential(layers.Linear(5, 7, act="tanh", dtype="float64"),
                             layers.Linear(7, 3, dtype="float64"))


def _batch(n=8):
    rng = np.random.default_rng(1)
    return rng.standard_normal((n, 5)), rng.integers(0, 3, (n, 1))


@pytest.fixture
def hook():
    calls = []

    def record(leaf):
        calls.append(None if leaf is None else (leaf, leaf.grad.value().copy(),
                                                 [p.grad is None for p in net.params()]))

    net = _net()
    backward.grad_ready_hooks.append(record)
    yield net, calls
    backward.grad_ready_hooks.remove(record)


def test_backward_reports_each_gradient_once_as_soon_as_it_is_final(hook):
    net, calls = hook
    x, y = _batch()
    w1, b1, w2, b2 = net.params()
    F.cross_entropy(net(tape.Variable(x)), y).backward()
    assert calls[-1] is None and None not in calls[:-1]       # then backward's end, once
    reported = [leaf for leaf, _, _ in calls[:-1]]
    assert sorted(map(id, reported)) == sorted(map(id, net.params()))
    for leaf, value, _ in calls[:-1]:
        np.testing.assert_array_equal(value, leaf.grad.value())    # final when reported
    # the last layer's gradients are reported while the first layer's are still being made
    first_of_last_layer = next(i for i, (leaf, _, _) in enumerate(calls[:-1])
                               if leaf is w2 or leaf is b2)
    assert calls[first_of_last_layer][2][:2] == [True, True]


def test_a_gradient_accumulated_over_backward_calls_is_reported_with_the_sum(hook):
    net, calls = hook
    x, y = _batch()
    for _ in range(2):
        tape.reset_global_tape()
        F.cross_entropy(net(tape.Variable(x)), y).backward()
    w1 = net.params()[0]
    reported = [c[1] for c in calls if c is not None and c[0] is w1]
    np.testing.assert_allclose(reported[1], 2 * reported[0], rtol=1e-12)


def test_without_hooks_backward_gives_the_same_gradients(hook, monkeypatch):
    net, _ = hook
    x, y = _batch()
    F.cross_entropy(net(tape.Variable(x)), y).backward()
    with_hooks = [p.grad.value() for p in net.params()]
    plain = _net()
    monkeypatch.setattr(backward, "grad_ready_hooks", [])
    F.cross_entropy(plain(tape.Variable(x)), y).backward()
    for a, p in zip(with_hooks, plain.params()):
        np.testing.assert_array_equal(a, p.grad.value())


@pytest.mark.parametrize("n, world", [(10, 4), (12, 3), (7, 2), (3, 5), (1, 1)])
def test_shard_deals_out_every_example_once_per_epoch_padded_to_equal_parts(n, world):
    parts = [distributed.shard(n, r, world, seed=3, epoch=2) for r in range(world)]
    per_rank = -(-n // world)
    assert all(len(p) == per_rank for p in parts)
    seen = np.concatenate(parts)
    assert set(seen.tolist()) == set(range(n))
    assert len(seen) - n == per_rank * world - n < world        # padding only
    order = distributed.shard(n, 0, 1, seed=3, epoch=2)
    dealt = np.empty(per_rank * world, np.int64)
    for r, p in enumerate(parts):
        dealt[r::world] = p
    np.testing.assert_array_equal(dealt[:n], order)              # the one-process order, dealt


def test_shard_order_follows_seed_and_epoch():
    def order(seed, epoch):
        return distributed.shard(20, 1, 2, seed=seed, epoch=epoch).tolist()
    assert order(0, 0) == order(0, 0)
    assert order(0, 0) != order(0, 1) and order(0, 0) != order(1, 0)
    assert distributed.shard(6, 1, 2, shuffle=False).tolist() == [1, 3, 5]


@pytest.mark.parametrize("args, message", [
    ((10, 2, 2), "rank must be an int in [0, 2)"),
    ((0, 0, 1), "n_examples must be a positive int"),
    ((5, 0, 0), "world_size must be a positive int"),
])
def test_shard_rejects_bad_arguments(args, message):
    with pytest.raises(tape.InvalidArgumentError, match=re.escape(message)):
        distributed.shard(*args)


def test_in_one_process_the_world_is_one_and_data_parallel_trains_as_usual():
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    x, y = _batch()
    model, plain = distributed.DataParallel(_net()), _net()
    for net in (model, plain):
        sgd = optim.SGD(0.1)
        for _ in range(3):
            tape.reset_global_tape()
            F.cross_entropy(net(tape.Variable(x)), y).backward()
            sgd(net.params())
    for a, b in zip(model.params(), plain.params()):
        np.testing.assert_array_equal(a.value(), b.value())
    v = tape.Variable(np.arange(3.0))
    np.testing.assert_array_equal(distributed.allreduce(v, op="mean").value(), v.value())
    with pytest.raises(tape.InvalidArgumentError, match="op must be 'sum' or 'mean'"):
        distributed.allreduce(v, op="max")


def test_collective_ops_check_their_ring_and_root_before_running():
    v = tape.Variable(np.ones(2))
    with pytest.raises(tape.InvalidArgumentError, match="ring_id=1 names no communicator"):
        tape.ops.c_allreduce_sum(v, ring_id=1)
    with pytest.raises(tape.InvalidArgumentError, match=r"root=1 must be a rank, 0 \.\. 0"):
        tape.ops.c_broadcast(v, root=1)


def test_a_collective_inside_mpirun_before_init_is_an_error(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(tape.PreconditionNotMetError, match=r"init\(\) has not run"):
        tape.ops.c_allreduce_sum(tape.Variable(np.ones(2)))


def _training_program(clip=None):
    net = _net()
    x, y = _batch()
    program = static.trace(lambda a, b: F.cross_entropy(net(a), b), x, y)
    (cost,) = program.fetch_names
    updates = optim.Momentum(0.1, momentum=0.9, grad_clip=clip).minimize(cost, program)
    return net, program, cost, updates


@pytest.mark.parametrize("clip", [None, ClipGradByGlobalNorm(1.0)], ids=["plain", "clipped"])
def test_data_parallel_puts_an_allreduce_and_a_scale_per_gradient_before_the_optimizer(clip):
    net, program, _, _ = _training_program(clip)
    startup = static.data_parallel(program, nranks=2)
    ops = program.global_block().ops
    first_update = next(i for i, op in enumerate(ops) if op.attrs.get("op_role", 0) & 2)
    names = [p.name for p in net.params()]
    sync = ops[first_update - 2 * len(names):first_update]
    assert [op.type for op in sync] == ["c_allreduce_sum", "scale"] * len(names)
    assert sorted(op.input("X")[0] for op in sync[::2]) == sorted(n + "@GRAD" for n in names)
    for allreduce, scale in zip(sync[::2], sync[1::2]):
        grad = allreduce.input("X")
        assert allreduce.output("Out") == grad == scale.input("X") == scale.output("Out")
        assert allreduce.attrs["ring_id"] == 0 and allreduce.attrs["use_calc_stream"]
        assert scale.attrs["scale"] == 0.5 and allreduce.attrs["op_role"] == 1
        assert allreduce.attrs["op_role_var"] == (grad[0][:-5], grad[0])
    assert not any(op.type.startswith("c_") for op in ops[first_update:])
    broadcasts = startup.global_block().ops
    assert [(op.type, op.input("X"), op.output("Out"), op.attrs["root"]) for op in broadcasts] \
        == [("c_broadcast", [n], [n], 0) for n in names]
    assert startup.scope is program.scope


def _reloaded(program):
    """``program`` saved as bytes and parsed back, with its scope; and its update ops."""
    loaded = static.Program(ProgramDesc.parse_from_string(program.serialize_to_string()),
                            program.scope)
    return loaded, [op for op in loaded.global_block().ops if op.type == "momentum"]


def test_a_rewritten_program_saves_loads_and_trains_as_before():
    net, program, _, _ = _training_program()
    plain_net, plain, _, _ = _training_program()
    startup = static.data_parallel(program)
    (loaded, updates), (plain, plain_updates) = _reloaded(program), _reloaded(plain)
    added = [(op.type, op.inputs, op.outputs, op.attrs) for op in program.global_block().ops
             if op.type in ("c_allreduce_sum", "scale")]
    assert added and added == [(op.type, op.inputs, op.outputs, op.attrs)
                               for op in loaded.global_block().ops
                               if op.type in ("c_allreduce_sum", "scale")]
    assert _reloaded(startup)[0].global_block().ops[0].type == "c_broadcast"
    exe = static.Executor()
    exe.run(startup, targets=startup.global_block().ops)
    before = program.scope.find_var(net.params()[0].name).value.copy()
    x, y = _batch()
    for _ in range(3):      # in a world of one, allreduce and broadcast change nothing
        exe.run(loaded, {"input_0": x, "input_1": y}, loaded.fetch_names, targets=updates)
        exe.run(plain, {"input_0": x, "input_1": y}, plain.fetch_names, targets=plain_updates)
    assert not np.array_equal(before, program.scope.find_var(net.params()[0].name).value)
    for p, q in zip(net.params(), plain_net.params()):
        np.testing.assert_array_equal(program.scope.find_var(p.name).value,
                                      plain.scope.find_var(q.name).value)


def test_data_parallel_needs_a_training_program_and_rewrites_once():
    net = _net()
    x, y = _batch()
    program = static.trace(lambda a, b: F.cross_entropy(net(a), b), x, y)
    with pytest.raises(tape.PreconditionNotMetError, match="has no optimizer ops"):
        static.data_parallel(program)
    _, program, _, _ = _training_program()
    static.data_parallel(program)
    with pytest.raises(tape.PreconditionNotMetError, match="rewrite a program once"):
        static.data_parallel(program)
    with pytest.raises(tape.InvalidArgumentError, match="nranks must be a positive int"):
        static.data_parallel(_training_program()[1], nranks=0)


def test_init_without_mpi4py_says_what_to_install(monkeypatch):
    import sys

    from tape import world
    monkeypatch.setitem(sys.modules, "mpi4py", None)     # as if not installed
    monkeypatch.setattr(world._world, "comm", None)
    with pytest.raises(tape.PreconditionNotMetError, match=r"mpi4py is not installed.*\[dist\]"):
        distributed.init()


def test_the_timeout_is_read_from_the_environment(monkeypatch):
    from tape import world
    monkeypatch.setenv("TAPE_DIST_TIMEOUT", "2.5")
    assert world.timeout() == 2.5
    monkeypatch.setenv("TAPE_DIST_TIMEOUT", "soon")
    with pytest.raises(tape.PreconditionNotMetError, match="TAPE_DIST_TIMEOUT must be a number"):
        world.timeout()


@pytest.mark.parametrize("user_value", [None, "1"])
def test_init_sets_open_mpis_allreduce_algorithm_before_mpi_init_unless_the_user_did(
        monkeypatch, user_value):
    import sys
    import types

    from tape import world
    variable = "OMPI_MCA_coll_libnbc_iallreduce_algorithm"
    seen = {}

    class Comm:
        def Get_size(self):
            seen["at MPI_Init"] = os.environ.get(variable)     # mpi4py's import ran MPI_Init
            return 1
    fake = types.ModuleType("mpi4py")
    fake.MPI = types.SimpleNamespace(COMM_WORLD=Comm())
    monkeypatch.setitem(sys.modules, "mpi4py", fake)
    monkeypatch.setattr(world._world, "comm", None)
    monkeypatch.setattr(world._world, "MPI", None)
    if user_value is None:
        monkeypatch.setenv(variable, "")        # so that teardown removes what init() sets
        monkeypatch.delenv(variable)
    else:
        monkeypatch.setenv(variable, user_value)
    distributed.init()
    assert seen["at MPI_Init"] == (user_value or "3")      # 3: reduce-scatter + allgather
