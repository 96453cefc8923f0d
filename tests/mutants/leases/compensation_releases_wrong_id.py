"""Mutant: the compensating release deletes a fresh id, not the abandoned lease's.

The bug: a compensation is built anew from a newly drawn lease id instead of
the acquire's own ``RedisRelease`` (the seed clones the acquire's release,
``let abandoned_release = release.clone()``, 002_348438d99c360737.txt:510-511,
and spawns it, 550-557), so its ``HDEL`` removes nothing and the lease nobody
owns keeps its slot until its TTL. Ordinary releases are right. Exposed by a
lost acquire reply, whose ambiguous outcome must be compensated.
"""

from __future__ import annotations

from dataclasses import replace

from mutants.leases import LeaseMutant, register_lease_mutant
from stores.axond_leases import LeaseLimiter
from stores.axond_leases.release import LeaseRelease

MUTANT = LeaseMutant(
    name="compensation_releases_wrong_id",
    breaks="a compensating release deletes a freshly drawn lease id: the abandoned lease stays",
    seed="002_348438d99c360737.txt:510-511",
    schedule=({"at": "500ms", "fault": "lose_reply", "replica": 0, "call": "acquire"},),
    exposed_by="reply_lost on acquire",
)


class CompensationReleasesWrongId(LeaseLimiter):
    def _compensate(self, release: LeaseRelease) -> None:
        replace(release, lease_id=self.new_lease_id()).spawn()  # the bug


register_lease_mutant(MUTANT, CompensationReleasesWrongId)
