"""Mutant (Python): a settle of zero spend that returns before releasing the hold."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant
from stores.axond_budget.contract import BudgetKey, Reservation
from stores.axond_budget.redis_budget import RedisBudget

MUTANT = Mutant(
    name="settle_with_zero_actual_keeps_hold",
    derived_from="axond_budget.redis_v1",
    breaks="settle of zero actual spend (and so release) returns without dropping the hold",
    scenario="mutants/v1-busy-subjects.toml",
    damage=("leaks", "false_denials"),
)


class SettleWithZeroActualKeepsHold(RedisBudget):
    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        if actual_microdollars == 0:
            return  # the bug: "nothing to charge" taken for "nothing to do"
        await super().settle(key, reservation, actual_microdollars)


KIND = register_redis_mutant(MUTANT, store_class=SettleWithZeroActualKeepsHold)
