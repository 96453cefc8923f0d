"""Mutant (Python): a cleanup whose SCAN failed falls back to a wider pattern.

When the first ``SCAN`` of ``remove_prefix`` is lost, this store retries
with the prefix cut before its hash tag closes (``{s1*``), "to be sure":
the retry deletes the counters of every session whose id starts the same,
live ones included. The seed escapes the pattern precisely so that it can
never over-match (004_3d0b2b7832cd8f83.txt:735-746), and a failed SCAN
gives up, leaving the keys to their TTL (792-797).
"""

from __future__ import annotations

from mutants.av_state import Mutant, register_mutant
from stores.av_state.keys import prefix_pattern
from stores.av_state.redis_store import SCAN_COUNT, RedisStateStore
from stores.axond_budget.redis_budget import UNREACHABLE

MUTANT = Mutant(
    name="cleanup_over_matches",
    breaks="remove_prefix retries a failed SCAN with a pattern that matches other "
           "sessions' counters and deletes them",
    violates="004_3d0b2b7832cd8f83.txt:735-746",
    scenario={"fleet": {"replicas": 1}, "workload": {"arrivals": "poisson(600/h)"},
              "faults": {"schedule": [{"at": "0ms", "fault": "lose_request", "replica": 0,
                                       "call": "SCAN", "count": 1}]}},
    damage=("counter_resets",),
    exposed_by="on SCAN",
)


class OverMatchingCleanup(RedisStateStore):
    async def remove_prefix(self, prefix: str) -> None:
        pattern = prefix_pattern(prefix)
        for _ in range(2):
            try:
                await self._delete_matching(pattern)
                return
            except UNREACHABLE:
                # The bug: the fallback cuts the prefix before its hash tag
                # closes, matching every session id that starts the same.
                pattern = prefix_pattern(prefix[:-2])

    async def _delete_matching(self, pattern: str) -> None:
        cursor = 0
        while True:
            cursor, batch = await self.data.scan(cursor, match=pattern, count=SCAN_COUNT)
            if batch:
                await self.data.delete(*batch)
            if cursor == 0:
                return


KIND = register_mutant(MUTANT, store_class=OverMatchingCleanup)
