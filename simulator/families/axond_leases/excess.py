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

Once an operator changed ``max_in_flight`` (``reconfigure``), the limit is
no longer one number (``Limits``): the excess is judged against the lowest
limit any replica runs with at that instant, and of the counted callers
those up to the highest limit a holder was admitted under are the
operator's (``config_change``: a limit lowered under callers already
holding, or old and new limits serving side by side); past that, the store's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class Limits:
    """``max_in_flight`` as an operator's change made it vary (see the module
    docstring): the lowest limit in force from each instant on, and each
    holder's spell with the limit it was admitted under."""

    floors: list[tuple[int, int]]
    """``(time, the lowest limit in force from then on)``, in time order."""
    holders: list[tuple[int, int, int]]
    """``(time, +1 | -1, the limit that holder was admitted under)``."""
    own: Any = STORE_LOGIC
    """The label of the excess the store admitted past its own count."""


CONFIG_CHANGE = "config_change"


def concurrency_excess(holder_changes: list[tuple[int, int]],
                       uncounted: list[tuple[int, int, str]], max_in_flight: int,
                       limits: Limits | None = None) -> Excess:
    """The excess of a key from its ``(time, ±1)`` holder changes and its
    closed ``(start, end, cause)`` spells of uncounted holding; with
    ``limits``, against a limit an operator changed."""
    if limits is not None:
        return _varying_excess(holder_changes, uncounted, max_in_flight, limits)
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


def _varying_excess(holder_changes: list[tuple[int, int]],
                    uncounted: list[tuple[int, int, str]], max_in_flight: int,
                    limits: Limits) -> Excess:
    """``concurrency_excess`` against a limit an operator changed."""
    changes: dict[int, list[tuple[str, Any, int]]] = defaultdict(list)
    for time_us, delta in holder_changes:
        changes[time_us].append(("holder", None, delta))
    for time_us, delta, limit in limits.holders:
        changes[time_us].append(("limit", limit, delta))
    for time_us, floor in limits.floors:
        changes[time_us].append(("floor", floor, 0))
    for start, end, cause in uncounted:
        if end > start:
            changes[start].append(("uncounted", cause, 1))
            changes[end].append(("uncounted", cause, -1))
    excess = Excess()
    holding, floor = 0, max_in_flight
    admitted_under: Counter = Counter()
    uncounted_by_cause: Counter = Counter()
    previous: int | None = None
    for time_us in sorted(changes):
        if previous is not None and holding > floor:
            allowed = max([floor, *(limit for limit, count in admitted_under.items()
                                    if count > 0)])
            _integrate(excess, holding, uncounted_by_cause, floor, (time_us - previous) / 1e6,
                       allowed, limits.own)
        for what, value, step in changes[time_us]:
            if what == "holder":
                holding += step
            elif what == "limit":
                admitted_under[value] += step
            elif what == "floor":
                floor = value
            else:
                uncounted_by_cause[value] += step
        excess.peak = max(excess.peak, holding - floor)
        previous = time_us
    return excess


def _integrate(excess: Excess, holding: int, uncounted_by_cause: Counter, max_in_flight: int,
               seconds: float, allowed: int | None = None, own_label: Any = STORE_LOGIC) -> None:
    over = holding - max_in_flight
    excess.lease_seconds += over * seconds
    uncounted = sum(count for count in uncounted_by_cause.values() if count > 0)
    allowed = max_in_flight if allowed is None else allowed
    # Counted callers up to the highest limit one was admitted under: the
    # operator's change let them in; past it, the store admitted by its own count.
    own = max(0, holding - uncounted - allowed)
    if own:
        excess.by_cause[own_label] += own * seconds
    changed = max(0, min(holding - uncounted, allowed) - max_in_flight)
    if changed:
        excess.by_cause[CONFIG_CHANGE] += changed * seconds
    rest = over - own - changed
    if rest and uncounted:
        for cause, count in uncounted_by_cause.items():
            if count > 0:
                excess.by_cause[cause] += rest * count / uncounted * seconds
