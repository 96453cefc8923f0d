"""Mutant: a compensating release makes one attempt only.

The bug: releases of dropped permits retry on fresh connections, but a
compensation (the release of a lease nobody will own) gets a single
attempt; when that one is skipped (its connection is suspect) or fails, the
lease keeps its slot until its TTL. The seed spawns the same ``RedisRelease``
for both (002_348438d99c360737.txt:550-557), whose loop retries on fresh
connections (208-256). Exposed by a dropped waiter: the next acquire reads
another's reply, is compensated, and its connection is suspect.
"""

from __future__ import annotations

from dataclasses import replace

from mutants.leases import LeaseMutant, register_lease_mutant
from stores.axond_leases import LeaseLimiter
from stores.axond_leases.release import LeaseRelease

MUTANT = LeaseMutant(
    name="compensation_never_retried",
    breaks="a compensating release makes its first attempt only (no retries on fresh "
           "connections)",
    seed="002_348438d99c360737.txt:208-256",
    schedule=({"at": "500ms", "fault": "dropped_waiter", "replica": 0},),
    exposed_by="waiter_dropped on acquire",
)


class CompensationNeverRetried(LeaseLimiter):
    def _compensate(self, release: LeaseRelease) -> None:
        replace(release, max_attempts=1).spawn()  # the bug


register_lease_mutant(MUTANT, CompensationNeverRetried)
