"""Mutant: a reserve whose reply was lost "cleans up" the hold it may have
written by deleting the subject's whole holds hash.

The bug is on the compensation path of a lost reserve reply. The seed bounds
what such a loss may cost: that one hold, until its TTL
(000_cfca2acab2180986.txt:877-886); and a reservation id is "Unique per
reservation, so a settlement releases exactly the hold it belongs to even
when a key has many in flight" (001_25c2cca22987a5cc.txt:60-66). Deleting the
hash drops every other request's live hold: they stop counting while their
requests still run, and the cap admits into room already promised.
"""

from __future__ import annotations

import contextlib

from mutants.budget import V1, FaultExposed, lose, reserve_then
from stores.axond_budget import redis_kind
from stores.axond_budget.contract import Admission, BudgetKey, Reservation
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget, v1_keys
from stores.registry import register

MUTANT = FaultExposed(
    name="reserve_timeout_drops_every_hold",
    derived_from="axond_budget.redis_v1",
    breaks="a reserve whose reply is lost deletes the subject's whole holds hash",
    seed="001_25c2cca22987a5cc.txt:60-66",
    scenario={**V1, "workload": {**V1["workload"], "duration": "lognormal(150ms, 0.3)"},
              "faults": {"schedule": lose("lose_reply", "reserve_v1")}},
    exposing=("faults",),
    exposed_by="reply_lost on reserve_v1",
)


class DropsEveryHoldOnLostReserve(RedisBudget):
    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        return await reserve_then(self, key, estimated_microdollars, self._clean_up)

    async def _clean_up(self, key: BudgetKey, reservation: Reservation) -> Admission:
        with contextlib.suppress(*UNREACHABLE):
            # The bug: the whole hash, not ``HDEL holds reservation.id``.
            await self.data.delete(v1_keys(self.settings.key_prefix, key)[1])
        return self.settings.on_unavailable.admission()


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, store_class=DropsEveryHoldOnLostReserve))
