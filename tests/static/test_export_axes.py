"""Exported split and slice ops count their axes from the start: Paddle's predictor rejects a
negative split axis and crashes on a negative slice axis."""
import numpy as np
import pytest
from paddle_runner import needs_paddle, paddle_predict

import tape
import tape.static as static

X = np.random.default_rng(3).standard_normal((3, 3, 4)).astype(np.float32)
TRACED = 2
BATCHES = (2, 1, 3)     # the traced batch size and others


def _model(x):
    low, high = tape.ops.split(x, num=2, axis=-1)
    return tape.ops.concat([tape.ops.slice(high, axes=[-1, -2], starts=[1, 0], ends=[2, 3]),
                            low], axis=-1)


def _eager(batch):
    with tape.no_grad():
        return _model(tape.Variable(X[:batch])).numpy()


@pytest.fixture
def saved(tmp_path):
    program = static.trace(_model, X[:TRACED])
    ops = {op.type: op for op in program.global_block().ops}
    assert ops["split"].attrs["axis"] == -1 and list(ops["slice"].attrs["axes"]) == [-1, -2]
    static.save_inference_model(tmp_path, program)
    return tmp_path


@pytest.mark.parametrize("batch", BATCHES)
def test_the_export_counts_axes_from_the_start_and_computes_the_same(saved, batch):
    loaded = static.load_inference_model(saved)
    ops = {op.type: op for op in loaded.global_block().ops}
    assert ops["split"].attrs["axis"] == 2 and list(ops["slice"].attrs["axes"]) == [2, 1]
    (out,) = static.Executor().run(loaded, {loaded.feed_names[0]: X[:batch]},
                                   loaded.fetch_names)
    np.testing.assert_array_equal(out, _eager(batch))


@needs_paddle
@pytest.mark.parametrize("batch", BATCHES)
def test_paddle_serves_exported_split_and_slice(saved, batch):
    np.testing.assert_allclose(paddle_predict(saved, X[:batch]), _eager(batch), rtol=0,
                               atol=1e-6)
