"""Concurrency excess of one key: callers holding above ``max_in_flight``, over time, by cause.

The callers holding a permit on a key, ``H(t)``, change only when one is
admitted or stops; the ones holding without a lease the store counts,
``U(t)``, change when a lease is lost, expires or comes back. Between two
changes both are constant, so the excess ``max(0, H - max_in_flight)`` is
integrated exactly, segment by segment, as lease-seconds.

How a segment's excess ``E`` splits: the callers whose leases the store
counts number ``H - U``; past ``max_in_flight`` those the store admitted by
its own count (``store_logic``). The rest of ``E`` is the uncounted callers',
shared over their causes in proportion to how many hold for each.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from simulator.plugin.attribution import STORE_LOGIC


@dataclass(slots=True)
class Excess:
    """The excess of one key (or of them all, summed): lease-seconds, the peak
    number of callers above the limit, and the lease-seconds by cause."""

    lease_seconds: float = 0.0
    peak: int = 0
    by_cause: Counter = field(default_factory=Counter)

    def add(self, other: Excess) -> None:
        self.lease_seconds += other.lease_seconds
        self.peak = max(self.peak, other.peak)
        self.by_cause.update(other.by_cause)


def concurrency_excess(holder_changes: list[tuple[int, int]],
                       uncounted: list[tuple[int, int, str]], max_in_flight: int) -> Excess:
    """The excess of a key from its ``(time, ±1)`` holder changes and its
    closed ``(start, end, cause)`` spells of uncounted holding."""
    changes: dict[int, list[tuple[int, str | None, int]]] = defaultdict(list)
    for time_us, delta in holder_changes:
        changes[time_us].append((delta, None, 0))
    for start, end, cause in uncounted:
        if end > start:
            changes[start].append((0, cause, 1))
            changes[end].append((0, cause, -1))
    excess = Excess()
    holding = 0
    uncounted_by_cause: Counter = Counter()
    previous: int | None = None
    for time_us in sorted(changes):
        if previous is not None and holding > max_in_flight:
            _integrate(excess, holding, uncounted_by_cause, max_in_flight,
                       (time_us - previous) / 1e6)
        for delta, cause, step in changes[time_us]:
            holding += delta
            if cause is not None:
                uncounted_by_cause[cause] += step
        # Changes at one instant are applied together: one caller leaving as
        # another arrives is no excess.
        excess.peak = max(excess.peak, holding - max_in_flight)
        previous = time_us
    return excess


def _integrate(excess: Excess, holding: int, uncounted_by_cause: Counter, max_in_flight: int,
               seconds: float) -> None:
    over = holding - max_in_flight
    excess.lease_seconds += over * seconds
    uncounted = sum(count for count in uncounted_by_cause.values() if count > 0)
    own = max(0, holding - uncounted - max_in_flight)
    if own:
        excess.by_cause[STORE_LOGIC] += own * seconds
    rest = over - own
    if rest and uncounted:
        for cause, count in uncounted_by_cause.items():
            if count > 0:
                excess.by_cause[cause] += rest * count / uncounted * seconds
