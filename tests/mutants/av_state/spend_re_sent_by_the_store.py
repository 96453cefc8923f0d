"""Mutant (Python): a spend that failed is re-sent by the store itself,
within the same call.

When a ``try_spend`` reply is lost the caller cannot tell "commit succeeded,
response lost" from "commit never ran" (004_3d0b2b7832cd8f83.txt:212-224);
the seed lets the error reach the caller (it fails closed) and runs with the
driver's re-sends off. This store re-sends the script on its own: a charge
that had run is charged again for one call, beyond anything the lab did.
"""

from __future__ import annotations

from collections.abc import Sequence

from mutants.av_state import Mutant, register_mutant
from stores.av_state.contract import BackendError, Spend, TrySpendOutcome
from stores.av_state.redis_store import RedisStateStore

MUTANT = Mutant(
    name="spend_re_sent_by_the_store",
    breaks="try_spend_many re-sends its script once when the reply is lost: a spend "
           "that ran is charged twice",
    violates="004_3d0b2b7832cd8f83.txt:212-224",
    scenario={"faults": {"schedule": [
        {"at": "30s", "fault": "lose_reply", "replica": replica, "call": "try_spend",
         "count": 3} for replica in (0, 1)]}},
    damage=("double_debits",),
    exposed_by="on try_spend",
    counterfactual_differs=(
        "the store's own re-send doubles the charges the caller's retry would have "
        "doubled under the lost reply (allowed): the fixed store double-debits them too"),
)


class ReSendsItsSpend(RedisStateStore):
    async def try_spend_many(self, spends: Sequence[Spend]) -> TrySpendOutcome:
        try:
            return await super().try_spend_many(spends)
        except BackendError:
            return await super().try_spend_many(spends)  # the bug: a blind re-send


KIND = register_mutant(MUTANT, store_class=ReSendsItsSpend)
