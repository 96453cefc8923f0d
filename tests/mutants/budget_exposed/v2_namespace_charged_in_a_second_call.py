"""Mutant (Python, v2): a settlement that settles the subject scope in one
call and the namespace scope in a second, and gives up on the second when
the first one's reply is lost.

The bug: the v2 settlement is split by scope: ``settle_v1`` on the subject's
counter and holds, then ``settle_v1`` on the namespace's. When the subject
call's reply is lost the store gives up, so the subject is charged and
released but the namespace is neither: its total undercounts the spend and
its hold counts against the namespace cap until its deadline. The seed
settles both scopes in one script "so neither scope can be charged without
the other" (``000_cfca2acab2180986.txt:25-27``; ``SETTLE_V2``, ``168-181``).

Sound on a quiet network; exposed by ``reply_lost`` on ``settle_v1``.
"""

from __future__ import annotations

import logging

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.axond_budget import SCRIPTS
from stores.axond_budget.contract import BudgetKey, Reservation, require_amount
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget

logger = logging.getLogger(__name__)

MUTANT = Mutant(
    name="v2_namespace_charged_in_a_second_call",
    derived_from="axond_budget.redis_v2",
    breaks="the v2 settlement settles the namespace in a second call, skipped when the "
           "subject call's reply is lost",
    scenario="budget-exposed-v2-lost-settle-reply.toml",
    damage=("namespace_drift", "namespace_leaks"),
)


class NamespaceChargedInASecondCall(RedisBudget):
    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            return
        one_scope = self.data.register_script(SCRIPTS.source("settle_v1"))
        subject_spent, subject_holds, namespace_spent, namespace_holds = self._keys(key)
        try:
            for spent, holds in ((subject_spent, subject_holds),
                                 (namespace_spent, namespace_holds)):
                await one_scope(keys=[spent, holds], args=[reservation.id, actual_microdollars])
        except UNREACHABLE as error:
            # The bug: the scope not yet settled is left as it is.
            logger.error("budget settlement failed part-way (%s)", error)


KIND = register_exposed(MUTANT, store_class=NamespaceChargedInASecondCall)
