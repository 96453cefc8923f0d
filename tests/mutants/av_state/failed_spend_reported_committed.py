"""Mutant (Python): a spend whose call failed is reported committed (fails open).

When a ``try_spend`` request is lost the script never ran, nothing was
charged, yet this store answers the caller "committed": the call spends
budget the record never counts, and later calls are admitted past the
limit. The seed's caller treats a backend error as blocked, failing closed
(004_3d0b2b7832cd8f83.txt:212-218).
"""

from __future__ import annotations

from collections.abc import Sequence

from mutants.av_state import Mutant, register_mutant
from stores.av_state.contract import BackendError, Committed, Spend, TrySpendOutcome
from stores.av_state.redis_store import RedisStateStore

MUTANT = Mutant(
    name="failed_spend_reported_committed",
    breaks="try_spend_many answers a failed call as committed: spend the record never counts",
    violates="004_3d0b2b7832cd8f83.txt:212-218",
    scenario={"faults": {"schedule": [
        {"at": "30s", "fault": "lose_request", "replica": replica, "call": "try_spend",
         "count": 6} for replica in (0, 1)]}},
    damage=("budget_overshoot_units",),
    exposed_by="request_lost on try_spend",
)


class FailsOpen(RedisStateStore):
    async def try_spend_many(self, spends: Sequence[Spend]) -> TrySpendOutcome:
        try:
            return await super().try_spend_many(spends)
        except BackendError:
            return Committed(0)  # the bug: a failure read as a commit


KIND = register_mutant(MUTANT, store_class=FailsOpen)
