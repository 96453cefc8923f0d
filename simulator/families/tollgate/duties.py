"""The holders' background duties, checked by when they must have been done.

Every live holder runs one loop (seed 003 L1339-L1360, ``LeaseHolder.run_background``):
each ``flush_every`` it bills usage and releases retired leases; each
``reclaim_every`` it sweeps leases past their expiry and grace; with a
budget schedule, each ``rollover_every`` it runs the rollover pass that
deposits every account's allowance at its period's start. Any one holder
doing a duty does it for the fleet, so a duty left undone long after it fell
due, while the lab left the fleet alone, is the holders' own:

* ``periods_missed`` -- an account's budget period whose allowance no
  rollover deposited within ``rollover_every`` and one loop of its start;
* ``reclaims_overdue`` -- a lease no sweep reclaimed within ``reclaim_every``
  and one loop of its expiry plus grace, while no holder released it.

"Left alone" is ``LabLog.quiet_between``: no message fault, no fault rated,
none scheduled acting in the window, but a crash of fewer replicas than the
fleet has (the others still loop). Holders time their duties by their own
clocks: with any replica's clock skewed or drifting, neither is judged.
Both are ``store_only``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from simulator.engine.runtime import EPOCH_MS


@dataclass(frozen=True)
class Cadence:
    """How often the holders' loop runs each duty, and how long one loop's
    calls may take beyond that (``slack_ms``)."""

    flush_every_ms: int
    reclaim_every_ms: int
    rollover_every_ms: int
    slack_ms: int

    def late_by(self, every_ms: int) -> int:
        """How long after a duty falls due it must be done: its own period,
        the loop's, and one loop's calls."""
        return every_ms + self.flush_every_ms + self.slack_ms


def periods_due(period_ms: int, end_ms: int) -> Iterable[tuple[int, int]]:
    """Every budget period (ledger ms, periods anchored at 0) from the one the
    run starts in until ``end_ms``: its first instant, and when its
    allowance falls due (the run's start, for the period it starts in)."""
    start = EPOCH_MS - EPOCH_MS % period_ms
    yield start, EPOCH_MS
    start += period_ms
    while start <= end_ms:
        yield start, start
        start += period_ms
