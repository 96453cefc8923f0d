"""Mutant: a release gives up after its first retry.

The bug: a release makes its shared attempt and one retry on a fresh
connection, then gives up, leaving the lease to its TTL; the seed keeps
trying up to ``RELEASE_MAX_ATTEMPTS`` (8) within the retry window
(002_348438d99c360737.txt:47 and 208-257). Exposed by two lost release
requests on one replica: the shared attempt and the first retry.
"""

from __future__ import annotations

from mutants.leases import LeaseMutant, register_lease_mutant
from stores.axond_leases import LeaseLimiter

MUTANT = LeaseMutant(
    name="release_gives_up_after_one_retry",
    breaks="a release makes two attempts (one retry) instead of eight",
    seed="002_348438d99c360737.txt:208-257",
    schedule=({"at": "500ms", "fault": "lose_request", "replica": 0, "call": "release",
               "count": 2},),
    exposed_by="request_lost on release",
)


class ReleaseGivesUpAfterOneRetry(LeaseLimiter):
    release_attempts = 2  # the bug


register_lease_mutant(MUTANT, ReleaseGivesUpAfterOneRetry)
