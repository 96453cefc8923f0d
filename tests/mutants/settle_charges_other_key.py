"""Mutant (Python): a v1 settle that releases the right hold but charges another key."""

from __future__ import annotations

import logging

from mutants import Mutant, register_redis_mutant
from stores.axond_budget.contract import BudgetKey, Reservation, require_amount
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget

logger = logging.getLogger(__name__)

MUTANT = Mutant(
    name="settle_charges_other_key",
    derived_from="axond_budget.redis_v1",
    breaks="settle drops the request's hold but charges the spend to another key's counter "
           "(the subject's name with a stray suffix)",
    scenario="mutants/v1-busy-subjects.toml",
    damage=("drift", "overshoot"),
)


class SettleChargesOtherKey(RedisBudget):
    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            return
        _, holds = self._keys(key)
        # The bug: the spend counter of a key built from the wrong subject
        # (a stray suffix), beside the right holds hash.
        wrong_spent, _ = self._keys(BudgetKey(key.namespace, f"{key.subject}-"))
        try:
            await self._settle(keys=[wrong_spent, holds],
                               args=[reservation.id, actual_microdollars])
        except UNREACHABLE as error:
            # As the fixed store: a settlement is not retried.
            logger.error("budget settlement lost (%s)", error)


KIND = register_redis_mutant(MUTANT, store_class=SettleChargesOtherKey)
