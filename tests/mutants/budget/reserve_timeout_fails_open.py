"""Mutant: a reserve that cannot reach the store admits unheld (fail-open),
whatever ``on_unavailable`` says.

The bug is on the refusal path. The seed's default is fail-closed: "When a
shared store is unreachable the default stance is **fail-closed**: admission
is denied rather than silently unenforced" (001_25c2cca22987a5cc.txt:20-26);
only a configured ``Allow`` admits unenforced (478-520). Under the deny
policy a lost reserve request must cost that request a denial, never spend
the store never hears of.
"""

from __future__ import annotations

from mutants.budget import V1, FaultExposed, lose, reserve_then
from stores.axond_budget import redis_kind
from stores.axond_budget.contract import Admission, BudgetKey, Reservation
from stores.axond_budget.redis_budget import RedisBudget
from stores.registry import register

MUTANT = FaultExposed(
    name="reserve_timeout_fails_open",
    derived_from="axond_budget.redis_v1",
    breaks="a reserve that cannot reach the store admits unheld although the policy is deny",
    seed="001_25c2cca22987a5cc.txt:20-26",
    scenario={**V1, "faults": {"schedule": lose("lose_request", "reserve_v1", count=4)}},
    exposing=("faults",),
    exposed_by="request_lost on reserve_v1",
)


class FailsOpenOnTimeout(RedisBudget):
    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        return await reserve_then(self, key, estimated_microdollars, self._admit_unheld)

    async def _admit_unheld(self, key: BudgetKey, reservation: Reservation) -> Admission:
        return Admission.allowed(Reservation.unheld())  # the bug: the policy unread


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, store_class=FailsOpenOnTimeout))
