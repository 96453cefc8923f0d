"""Historical variants of the Redis budget store: the bugs the fixed one fixed.

Each variant is ``RedisBudget`` with one thing changed, and states only that
thing; everything else (keys, layouts, boot fences, the reserve decision) is
the fixed store's. The lab runs a variant and the fixed store on the same
scenario and seed to show what the fix is worth (``data/scenarios/variant-*``).
"""

from __future__ import annotations

import logging

from stores.axond_budget.contract import BudgetKey, Reservation
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget

logger = logging.getLogger(__name__)


class SplitSettlement(RedisBudget):
    """Settlement as two steps, release then charge: ``HDEL`` the hold, then
    ``INCRBY`` the spend (in the v2 layout each scope's hold and counter, one
    command each), instead of one script.

    The bug: a settlement can release without charging. When the release's
    reply is lost (a timeout, a dropped connection) the hold may or may not be
    gone, and this store gives up without sending the charge; a replica that
    dies between the two steps does the same. Either way the estimate stops
    counting and the spend is never recorded: recorded spend drifts below the
    truth, and the cap is overshot by spend the store never saw (the lab
    files it under ``settlement_lost``). The fix is ``settle_v1.lua`` /
    ``settle_v2.lua``: both steps in one script, so a lost reply costs nothing.
    """

    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        if not reservation.is_held:
            return
        keys = self._keys(key)
        # Both layouts list each scope's spend counter, then its holds hash.
        spent_keys, holds_keys = keys[0::2], keys[1::2]
        try:
            for holds in holds_keys:
                await self.data.hdel(holds, reservation.id)
        except UNREACHABLE as error:
            logger.error("budget release failed (%s); the spend is not charged", error)
            return
        if actual_microdollars <= 0:
            return
        try:
            for spent in spent_keys:
                await self.data.incrby(spent, actual_microdollars)
        except UNREACHABLE as error:
            logger.error("budget charge failed (%s); the spend is lost", error)


class NoReclaim(RedisBudget):
    """The reserve scripts without reclaiming expired holds: they sum every
    hold in the hash (``all_holds.lua`` in place of ``live_holds.lua``),
    whatever its deadline, and delete none.

    The bug: a hold whose request never settles (its replica crashed, its
    settlement was lost) keeps counting against the cap past its deadline,
    until the holds hash itself expires, twice the reservation TTL after the
    *last* admission on that key. On a busy key every admission pushes that
    back, so a crashed replica wedges the budget: requests are denied as
    exceeded while the truth has room, and the wedge lifts only after the key
    goes idle. The fix is the reclaim loop in ``live_holds.lua``: expired holds
    are dropped before every decision, so a dead replica's estimate stops
    counting at its deadline.
    """

    fragments = {"live_holds.lua": "all_holds.lua"}
