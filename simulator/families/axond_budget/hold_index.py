"""A source's holds ordered by deadline, their amounts summed: what the store
counts at an instant without a pass over every hold.

The budget oracle asks, at every observation of a request's own command, how
much a source of record counted when the store judged it: its spend plus the
holds whose deadline was still ahead. A sum over the holds costs O(holds per
key) each time, a fifth of a 10,000-replica run (1,600 holds a key); the
index answers it in O(log holds + holds already past their deadline), which
are few (the store reclaims them on its next call to the key).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from operator import itemgetter

_DEADLINE = itemgetter(0)


class HoldIndex:
    """One source's holds of one key: ``(deadline_ms, id)`` in order, and the
    total amount; kept in step with the holds by ``add`` and ``remove``."""

    __slots__ = ("by_deadline", "total")

    def __init__(self) -> None:
        self.by_deadline: list[tuple[int, str]] = []
        self.total = 0

    def add(self, hold_id: str, amount: int, deadline_ms: int) -> None:
        insort(self.by_deadline, (deadline_ms, hold_id))
        self.total += amount

    def remove(self, hold_id: str, amount: int, deadline_ms: int) -> None:
        del self.by_deadline[bisect_left(self.by_deadline, (deadline_ms, hold_id))]
        self.total -= amount

    def live(self, holds: dict[str, tuple[int, int]], now_ms: int) -> int:
        """The amount of ``holds`` (the indexed ones) whose deadline is after ``now_ms``."""
        past = bisect_right(self.by_deadline, now_ms, key=_DEADLINE)
        return self.total - sum(holds[hold_id][0] for _, hold_id in self.by_deadline[:past])


def changed_holds(old: dict[str, tuple[int, int]], new: dict[str, tuple[int, int]]) -> set[str]:
    """The ids whose hold differs between ``old`` and ``new`` (removed,
    created or rewritten), found at C speed."""
    return {hold_id for hold_id, _ in old.items() ^ new.items()}


def reindex(index: HoldIndex, old: dict[str, tuple[int, int]],
            new: dict[str, tuple[int, int]], changed: set[str]) -> None:
    """Bring ``index`` from ``old`` holds to ``new`` ones (``changed``: as
    ``changed_holds`` found them)."""
    for hold_id in changed:
        if hold_id in old:
            index.remove(hold_id, *old[hold_id])
        if hold_id in new:
            index.add(hold_id, *new[hold_id])
