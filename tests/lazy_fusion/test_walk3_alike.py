"""A graph whose given arrays or handle entries are shared otherwise than in the graph its
walker was written from (one product of a shared weight reading another array of it, or
another Variable of its array) is the same graph in another state: the walker's alike form
answers ``NOT_ALIKE`` and its full form, which gathers every array and entry, serves it (a
schedule of its own from its second step on, where the state keeps one), results bit for bit
the uncached path's; one
that is also wired otherwise, the full form refuses."""
import pytest
from test_lazy_replay import fresh_cache  # noqa: F401  (autouse: empty caches per test)
from test_unit_schedule import assert_same
from test_walk3_refusals import noted, train, uncached, walks  # noqa: F401  (walks: a fixture)

from tape import lazy_replay, replay_walker


@pytest.fixture
def full_walks(walks, monkeypatch):  # noqa: F811  (the fixture imported above)
    """``walks``, and what the walker's full form answers (None or the type of its answer)."""
    answers = []
    monkeypatch.setattr(replay_walker.Walker, "walk_full",
                        noted(replay_walker.Walker.walk_full, answers))
    return (*walks, answers)


@pytest.mark.parametrize("variant, scheduled", [
    ("another array of the weight", True),
    # (that state keeps no schedule, as before the walker had two forms: the uncached path)
    ("another Variable of the weight's array", False)])
def test_a_weight_shared_otherwise_is_walked_in_full_as_another_state(full_walks, variant,
                                                                      scheduled):
    params, data, answers, full = full_walks
    expected = uncached(params, data, variant)
    for step in range(3):
        before = lazy_replay.unit_replays
        got = train(params, data, variant)
        assert answers[-1] is replay_walker.NOT_ALIKE and full[-1] is tuple
        assert lazy_replay.unit_replays == before + (scheduled and step > 0)
        assert_same(got, expected)
    before = lazy_replay.unit_replays
    assert_same(train(params, data), uncached(params, data))     # (the first state's)
    assert answers[-1] is tuple and lazy_replay.unit_replays == before + 1


def test_a_graph_shared_and_wired_otherwise_is_refused_by_the_full_form(full_walks):
    params, data, answers, full = full_walks
    variant = "another Variable of the weight's array + another producer"
    before = lazy_replay.unit_replays
    got = train(params, data, variant)
    assert answers[-1] is replay_walker.NOT_ALIKE and full[-1] is None
    assert lazy_replay.unit_replays == before
    assert_same(got, uncached(params, data, variant))
