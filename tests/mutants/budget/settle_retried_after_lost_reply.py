"""Mutant: a settle whose reply was lost is sent again.

The bug is on the retry path. The seed: settlement happens "Exactly once per
admitted request ... no caller retries a settlement. So an implementation
must charge and release in one atomic step ... and it must not assume a
second chance" (001_25c2cca22987a5cc.txt:124-135). The settle script is not
idempotent (it charges whether or not the hold is still there, so a
settlement after expiry still counts), so a retry after a lost reply, when
the first attempt ran, charges the spend twice.
"""

from __future__ import annotations

import contextlib

from mutants.budget import V1, FaultExposed, lose
from stores.axond_budget import redis_kind
from stores.axond_budget.contract import BudgetKey, Reservation
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget
from stores.registry import register

MUTANT = FaultExposed(
    name="settle_retried_after_lost_reply",
    derived_from="axond_budget.redis_v1",
    breaks="a settle whose reply is lost is retried, charging twice when the first ran",
    seed="001_25c2cca22987a5cc.txt:124-135",
    scenario={**V1, "faults": {"schedule": lose("lose_reply", "settle_v1", count=2)}},
    exposing=("faults",),
    exposed_by="reply_lost on settle_v1",
)


class RetriesSettle(RedisBudget):
    async def settle(self, key: BudgetKey, reservation: Reservation,
                     actual_microdollars: int) -> None:
        if not reservation.is_held:
            return
        args = [reservation.id, actual_microdollars]
        try:
            await self._settle(keys=self._keys(key), args=args)
        except UNREACHABLE:
            with contextlib.suppress(*UNREACHABLE):
                await self._settle(keys=self._keys(key), args=args)  # the bug


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, store_class=RetriesSettle))
