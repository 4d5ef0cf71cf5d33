"""``lazy_replay._pattern``, the part of a cached backward's state that says which gathered
arrays and handle entries are one object: the same answer by a dict (few items) and by
numpy's ``unique`` (many), so a graph's state key means the same at any size."""
import numpy as np
import pytest

from tape import lazy_replay
from tape.variable import Variable


def _firsts(pattern, count: int) -> list:
    """The per-item position of the first same object, read back from either form."""
    positions = pattern[0] if type(pattern) is tuple else \
        np.frombuffer(pattern[:count * np.dtype(np.intp).itemsize], np.intp)
    return [int(p) for p in positions]


@pytest.mark.parametrize("count", [5, lazy_replay._UNIQUE_FROM - 1, lazy_replay._UNIQUE_FROM,
                                   300])
def test_a_pattern_names_each_item_by_the_first_same_object(count):
    pool = [np.zeros(2, np.float32) for _ in range(7)]
    arrays = [pool[(k * 5) % 7] for k in range(count)]
    leaf = Variable(np.ones(2, np.float32))
    entries = [leaf, leaf.desc]
    pattern = lazy_replay._pattern(arrays, entries)
    items = [*arrays, leaf._value, lazy_replay._NO_VALUE, leaf, leaf.desc]
    expected = [next(j for j, y in enumerate(items) if y is x) for x in items]
    assert type(pattern) is (tuple if len(items) < lazy_replay._UNIQUE_FROM else bytes)
    assert _firsts(pattern, len(items)) == expected
    leaves = pattern[1] if type(pattern) is tuple else pattern[-2:]
    assert list(leaves) == [1, 0]      # (the Variable a leaf; a VarDesc entry not)


def test_the_same_graph_in_another_state_gets_another_pattern():
    a, b = np.zeros(2), np.zeros(2)
    for count in (4, 200):
        same = lazy_replay._pattern([a] * count, [])
        other = lazy_replay._pattern([a] * (count - 1) + [b], [])
        assert same != other
        assert same == lazy_replay._pattern([b] * count, [])
