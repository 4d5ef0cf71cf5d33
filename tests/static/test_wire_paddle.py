"""ProgramDesc on the wire with real PaddlePaddle: Paddle's own framework_pb2 descriptors are
ours, and Tape reads what Paddle saves (program and parameters)."""
import numpy as np
from paddle_runner import needs_paddle, run_paddle

from tape import desc as D
from tape import params


@needs_paddle
def test_paddle_descriptors_match():
    """Paddle's own module and ours: the same messages, fields (name, number, label, type) and
    enum values, all the way down."""
    run_paddle("""
        from paddle.base.proto import framework_pb2 as theirs
        from tape import framework_pb2 as ours

        def fields(d):
            return {f.number: (f.name, f.is_required, f.is_repeated, f.type) for f in d.fields}

        def enums(d):
            return {name: {v.name: v.number for v in e.values}
                    for name, e in d.enum_types_by_name.items()}

        def same(a, b, path):
            assert fields(a) == fields(b), path
            assert enums(a) == enums(b), path
            assert set(a.nested_types_by_name) == set(b.nested_types_by_name), path
            for name, nested in a.nested_types_by_name.items():
                same(nested, b.nested_types_by_name[name], f"{path}.{name}")

        mine, paddles = ours.DESCRIPTOR, theirs.DESCRIPTOR
        assert set(mine.message_types_by_name) == set(paddles.message_types_by_name)
        for name, message in paddles.message_types_by_name.items():
            same(message, mine.message_types_by_name[name], name)
        assert enums(mine) == enums(paddles)
    """)


@needs_paddle
def test_tape_reads_what_paddle_saves(tmp_path):
    run_paddle("""
        import sys, numpy as np, paddle
        paddle.enable_static()
        d = sys.argv[1]
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, 4], "float32")
            y = paddle.nn.functional.softmax(paddle.static.nn.fc(x, 3, activation="relu"))
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        paddle.static.save_inference_model(d + "/model", [x], [y], exe, program=main)
        scope = paddle.static.global_scope()
        np.savez(d + "/params.npz", **{p.name: np.array(scope.find_var(p.name).get_tensor())
                                       for p in main.all_parameters()})
    """, tmp_path)
    data = (tmp_path / "model.pdmodel").read_bytes()
    program = D.ProgramDesc.parse_from_string(data)
    block = program.global_block()
    assert [op.type for op in block.ops] == ["feed", "mul", "elementwise_add", "relu", "softmax",
                                             "fetch"]
    names = sorted(n for n, v in block.vars.items() if v.persistable and v.type == D.DENSE_TENSOR)
    expected = [(n, block.vars[n].shape, block.vars[n].dtype) for n in names]
    loaded = params.load_params(tmp_path / "model.pdiparams", expected)
    saved = np.load(tmp_path / "params.npz")
    assert sorted(saved.files) == names
    for n in names:
        np.testing.assert_array_equal(loaded[n], saved[n])
    rewritten = tmp_path / "again.pdiparams"
    params.save_params(rewritten, loaded)
    assert rewritten.read_bytes() == (tmp_path / "model.pdiparams").read_bytes()
