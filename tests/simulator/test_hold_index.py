"""The budget oracle's index of a source's holds by deadline answers what the
naive sum over every hold answers, whatever the holds go through."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from simulator.families.axond_budget.hold_index import HoldIndex, changed_holds, reindex

HOLD_IDS = st.sampled_from([f"r{n}" for n in range(8)])
HOLDS = st.dictionaries(HOLD_IDS, st.tuples(st.integers(0, 1_000), st.integers(0, 50)))


def naive_live(holds: dict[str, tuple[int, int]], now_ms: int) -> int:
    return sum(amount for amount, deadline in holds.values() if deadline > now_ms)


@given(st.lists(HOLDS, min_size=1, max_size=12), st.lists(st.integers(-1, 51), min_size=1))
def test_the_index_counts_what_the_sum_over_every_hold_counts(states, instants):
    index, current = HoldIndex(), {}
    for holds in states:
        changed = changed_holds(current, holds)
        assert changed == {hold_id for hold_id in current.keys() | holds.keys()
                           if current.get(hold_id) != holds.get(hold_id)}
        reindex(index, current, holds, changed)
        current = dict(holds)
        assert index.total == sum(amount for amount, _ in current.values())
        for now_ms in instants:
            assert index.live(current, now_ms) == naive_live(current, now_ms)


def test_a_hold_rewritten_with_a_later_deadline_counts_until_the_later_one():
    index = HoldIndex()
    reindex(index, {}, {"r1": (100, 10)}, {"r1"})
    reindex(index, {"r1": (100, 10)}, {"r1": (40, 30)}, {"r1"})
    holds = {"r1": (40, 30)}
    assert index.live(holds, 20) == 40 and index.live(holds, 30) == 0
