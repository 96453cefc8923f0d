"""Mutant (Python, v1): a reserve that cannot reach the store admits unheld,
whatever ``on_unavailable`` says.

The bug: on a reserve error (a lost request, a refused connection, a
timeout) the store admits the request unheld instead of applying its
configured policy. Configured fail-closed, it then lets through requests it
never counted, whose spend it never records (an unheld reservation has
nothing to settle), and the cap is overshot by spend it never saw. The seed
makes fail-closed the default, "admission is denied rather than silently
unenforced" (``001_25c2cca22987a5cc.txt:24-26``), and admits unheld only
under ``UnavailablePolicy::Allow`` (``001_25c2cca22987a5cc.txt:484-522``).

Sound while the store answers; exposed by ``request_lost`` on
``reserve_v1``.
"""

from __future__ import annotations

import logging

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.axond_budget.contract import (
    Admission,
    BudgetKey,
    Reservation,
    require_amount,
)
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget

logger = logging.getLogger(__name__)

MUTANT = Mutant(
    name="reserve_error_admits_unheld",
    derived_from="axond_budget.redis_v1",
    breaks="a reserve that cannot reach the store admits unheld even when configured "
           "fail-closed",
    scenario="budget-exposed-lost-reserve-requests.toml",
    damage=("drift", "overshoot"),
)


class ReserveErrorAdmitsUnheld(RedisBudget):
    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        require_amount("the estimate", estimated_microdollars)
        reservation = Reservation(self.runtime.new_id(), estimated_microdollars)
        try:
            admitted = await self._reserve(keys=self._keys(key), args=[
                self.runtime.now_ms(), self.settings.reservation_ttl_ms, *self._caps,
                estimated_microdollars, reservation.id])
        except UNREACHABLE as error:
            # The bug: fail-open, whatever on_unavailable says.
            logger.warning("budget reserve failed (%s); admitting unenforced", error)
            return Admission.allowed(Reservation.unheld())
        if admitted == 1:
            return Admission.allowed(reservation)
        return Admission.exceeded()


KIND = register_exposed(MUTANT, store_class=ReserveErrorAdmitsUnheld)
