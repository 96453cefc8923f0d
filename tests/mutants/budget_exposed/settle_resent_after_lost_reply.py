"""Mutant (Python, v1): a settlement whose reply is lost is sent again.

The bug: ``settle`` treats a timeout as "the settlement did not happen" and
re-sends it. But a lost *reply* means the script ran: the re-sent
``settle_v1`` finds no hold and charges the actual spend a second time, so
recorded spend climbs above the truth and requests the cap had room for are
denied. The seed never retries a settlement, and says why: a settlement
that cannot reach Redis leaves the hold to its deadline, the alternative
trades latency for accounting the sweep already recovers
(``000_cfca2acab2180986.txt:892-895``); and ``SETTLE`` still charges an id
no longer held (``settle_v1.lua``), so a replay must never be sent
(``001_25c2cca22987a5cc.txt:124-131``, settle exactly once).

Sound on a quiet network; exposed by ``reply_lost`` on ``settle_v1``.
"""

from __future__ import annotations

import logging

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.axond_budget.contract import BudgetKey, Reservation, require_amount
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget

logger = logging.getLogger(__name__)

MUTANT = Mutant(
    name="settle_resent_after_lost_reply",
    derived_from="axond_budget.redis_v1",
    breaks="settle re-sends a settlement whose reply was lost, charging its spend twice",
    scenario="budget-exposed-lost-settle-reply.toml",
    damage=("drift", "false_denials"),
)


class SettleResentAfterLostReply(RedisBudget):
    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            return
        for attempt in (1, 2):
            try:
                await self._settle(keys=self._keys(key),
                                   args=[reservation.id, actual_microdollars])
                return
            except UNREACHABLE as error:
                # The bug: the lost reply is taken for a settlement that never ran.
                logger.error("budget settlement attempt %d failed (%s)", attempt, error)


KIND = register_exposed(MUTANT, store_class=SettleResentAfterLostReply)
