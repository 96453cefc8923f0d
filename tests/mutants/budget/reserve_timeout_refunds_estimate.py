"""Mutant: a reserve whose reply was lost "compensates" by taking the estimate
off the settled spend (``DECRBY``), as if the lost reserve had charged it.

The bug is on the recovery path of a lost reserve reply. The seed says what a
lost reply may cost: "The script may have written the reservation before the
response was lost, so the hold outlives the request by that entry's TTL"
(000_cfca2acab2180986.txt:877-886) -- a hold, until its deadline, and nothing
more. A reserve never charges spend, so taking spend back mints budget: the
recorded spend drifts below the truth and later admissions overshoot.
"""

from __future__ import annotations

import contextlib

from mutants.budget import V1, FaultExposed, lose, reserve_then
from stores.axond_budget import redis_kind
from stores.axond_budget.contract import Admission, BudgetKey, Reservation
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget, v1_keys
from stores.registry import register

MUTANT = FaultExposed(
    name="reserve_timeout_refunds_estimate",
    derived_from="axond_budget.redis_v1",
    breaks="a reserve whose reply is lost takes its estimate off the settled spend",
    seed="000_cfca2acab2180986.txt:877-886",
    # Early, while every reserve still admits: the lost replies leak the same
    # holds on either store, and only the refunds differ.
    scenario={**V1, "faults": {"schedule": lose("lose_reply", "reserve_v1", at="100ms")}},
    exposing=("faults",),
    exposed_by="reply_lost on reserve_v1",
)


class RefundsOnLostReserve(RedisBudget):
    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        return await reserve_then(self, key, estimated_microdollars, self._refund)

    async def _refund(self, key: BudgetKey, reservation: Reservation) -> Admission:
        # The bug: "undo" a charge the reserve never made.
        with contextlib.suppress(*UNREACHABLE):
            await self.data.incrby(v1_keys(self.settings.key_prefix, key)[0],
                                   -reservation.estimate_microdollars)
        return self.settings.on_unavailable.admission()


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, store_class=RefundsOnLostReserve))
