"""A graph the cached backward's walker (``tape.replay_walker``) is not written for: one that
reads an array of a subclass of numpy's (a ``numpy.memmap`` a data set is read from), a kind
of input no program gathers. Every step takes the uncached path, bit for bit; the same
program on plain arrays runs its unit schedule."""
import numpy as np
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_schedule import assert_same, sequences, step, uncached, weights

from tape import lazy_replay


def test_a_graph_reading_a_memory_map_gets_no_walker(monkeypatch, tmp_path):
    write_walker, walkers = lazy_replay.write_walker, []

    def kept(*args):
        walkers.append(write_walker(*args))
        return walkers[-1]
    monkeypatch.setattr(lazy_replay, "write_walker", kept)
    params, data = weights(), sequences(5)
    mapped = []
    for n, x in enumerate(data):
        m = np.memmap(tmp_path / f"sequence{n}.dat", np.float32, "w+", shape=x.shape)
        m[:] = x
        mapped.append(m)
    before = lazy_replay.unit_replays
    results = [step(params, mapped) for _ in range(4)]
    assert walkers == [None] and list(lazy_replay._entries.values()) == [None]
    assert lazy_replay.unit_replays == before
    for got in results:
        assert_same(got, uncached(params, data))
    lazy_replay._entries.clear()
    lazy_replay._seen.clear()
    for _ in range(4):
        assert_same(step(params, data), uncached(params, data))
    assert len(walkers) == 2 and walkers[1] is not None
    assert lazy_replay.unit_replays == before + 2
