"""Mutant (Python, v1): a settlement in two calls, charge then release, that
gives up when the charge's reply is lost.

The bug: ``settle`` sends ``INCRBY`` (the spend), then ``HDEL`` (the hold).
When the charge's reply is lost, the store gives up without the release: the
spend is recorded, and the hold counts against the cap as well until its
deadline, so requests the cap had room for are denied. The seed settles in
one script precisely so that "a settlement can never release without
charging, or charge without releasing" (``000_cfca2acab2180986.txt:110-111``).

Sound on a quiet network; exposed by ``reply_lost`` on ``INCRBY``.
"""

from __future__ import annotations

import logging

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.axond_budget.contract import BudgetKey, Reservation, require_amount
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget

logger = logging.getLogger(__name__)

MUTANT = Mutant(
    name="charge_then_release_gives_up",
    derived_from="axond_budget.redis_v1",
    breaks="settle charges, then releases in a second call, and gives up on the release "
           "when the charge's reply is lost",
    scenario="budget-exposed-lost-charge-reply.toml",
    damage=("leaks", "false_denials"),
)


class ChargeThenReleaseGivesUp(RedisBudget):
    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            return
        spent, holds = self._keys(key)
        try:
            if actual_microdollars > 0:
                await self.data.incrby(spent, actual_microdollars)
            await self.data.hdel(holds, reservation.id)
        except UNREACHABLE as error:
            # The bug: the charge may have landed; the hold is left to its deadline.
            logger.error("budget settlement failed part-way (%s)", error)


KIND = register_exposed(MUTANT, store_class=ChargeThenReleaseGivesUp)
