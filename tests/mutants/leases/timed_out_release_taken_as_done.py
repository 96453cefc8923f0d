"""Mutant: a shared release attempt that timed out is taken as done.

The bug: a release whose attempt on the shared connection outlives its
budget returns as if the lease were released, so nothing retries it; the
seed counts only a reply (``if matches!(result, Ok(Ok(_)))``,
002_348438d99c360737.txt:176-195) and falls through to fresh connections
otherwise. Exposed by a lost release request with nothing behind it on the
connection: no reply comes within the release budget.
"""

from __future__ import annotations

from mutants.leases import LeaseMutant, register_lease_mutant
from stores.axond_leases import LeaseLimiter
from stores.axond_leases.generations import SharedConnection
from stores.axond_leases.release import LeaseRelease

MUTANT = LeaseMutant(
    name="timed_out_release_taken_as_done",
    breaks="a release attempt that timed out on the shared connection counts as released",
    seed="002_348438d99c360737.txt:176-195",
    # Late in the run, so that no command behind the lost one shifts a reply
    # onto its waiter: the attempt times out.
    schedule=({"at": "2900ms", "fault": "lose_request", "replica": 0, "call": "release"},),
    exposed_by="request_lost on release",
)


class TimedOutReleaseTakenAsDone(LeaseRelease):
    async def _on_shared(self, shared: SharedConnection, budget_ms: int,
                         deadline_ms: int) -> bool:
        before = self.recovery.suspect_generation
        replied = await super()._on_shared(shared, budget_ms, deadline_ms)
        # The bug: an attempt that retired its generation (it timed out) is done.
        return replied or self.recovery.suspect_generation > before


class TimedOutReleaseTakenAsDoneLimiter(LeaseLimiter):
    def lease_release(self, redis_key: str, lease_id: str) -> LeaseRelease:
        settings = self.settings
        return TimedOutReleaseTakenAsDone(
            self.recovery, self.recovery.current, self.retry_slots, settings.timeout_ms,
            settings.lease_ttl_ms, redis_key, lease_id, self.release_attempts)


register_lease_mutant(MUTANT, TimedOutReleaseTakenAsDoneLimiter)
