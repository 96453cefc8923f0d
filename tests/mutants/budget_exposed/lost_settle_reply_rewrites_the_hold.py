"""Mutant (Python, v1): a settlement whose reply is lost writes its hold back.

The bug: when ``settle`` gets no reply, the store reads the seed's "a
settlement that cannot reach Redis leaves the hold to expire on its own
deadline" as an instruction, and writes the hold back (``HSET`` of the
reservation id, the estimate, a fresh deadline) so that it is sure to be
there. But a lost *reply* means the settlement ran: the spend is charged and
the hold released, and the hold written back counts the same estimate a
second time until its deadline, denying requests the cap has room for. The
seed leaves the hold as the settlement found it
(``000_cfca2acab2180986.txt:892-916``), and settles in one script so a
settlement can never release without charging or charge without releasing
(``000_cfca2acab2180986.txt:110-111``).

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
    name="lost_settle_reply_rewrites_the_hold",
    derived_from="axond_budget.redis_v1",
    breaks="a settlement whose reply is lost writes its hold back, to expire on a fresh "
           "deadline, though the settlement ran and released it",
    scenario="budget-exposed-lost-settle-reply-binding.toml",
    damage=("leaks", "false_denials"),
)

WRITE_HOLD = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])\nreturn 1\n"
"""The recovery's one command: write a hold as the reserve script does."""


class LostSettleReplyRewritesTheHold(RedisBudget):
    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            return
        _, holds = self._keys(key)
        try:
            await self._settle(keys=[*self._keys(key)],
                               args=[reservation.id, actual_microdollars])
        except UNREACHABLE as error:
            logger.error("budget settlement lost (%s); keeping the hold to its deadline", error)
            # The bug: the hold is written back, whatever the settlement did.
            deadline = self.runtime.now_ms() + self.settings.reservation_ttl_ms
            write_hold = self.data.register_script(WRITE_HOLD)
            try:
                await write_hold(keys=[holds], args=[
                    reservation.id, f"{reservation.estimate_microdollars}:{deadline}"])
            except UNREACHABLE:
                pass


KIND = register_exposed(MUTANT, store_class=LostSettleReplyRewritesTheHold)
