"""Mutant (Python): a refund that failed is retried by the store with a new
replay marker.

When the reply of a ``refund_many`` is lost the store cannot tell whether
it ran; this one "makes sure" and sends it again, with a fresh marker id.
If the first ran, the second credits the refund again: budget minted out of
a network flap. The seed's markers exist for exactly this: "a driver-level
retry reuses the SAME marker and no-ops" (004_3d0b2b7832cd8f83.txt:142-152,
587-590), and a refund is best effort, its failure logged, never retried.
"""

from __future__ import annotations

from collections.abc import Sequence

from mutants.av_state import Mutant, register_mutant
from stores.av_state.contract import Refund, refund_amount
from stores.av_state.keys import refund_marker_key
from stores.av_state.redis_store import RedisStateStore
from stores.axond_budget.redis_budget import UNREACHABLE

MUTANT = Mutant(
    name="refund_retried_with_a_fresh_marker",
    breaks="a refund whose reply was lost is sent again by the store with a new "
           "marker: credited twice",
    violates="004_3d0b2b7832cd8f83.txt:142-152",
    scenario={"workload": {"sessions": {"refunds": {"chance": 1.0}}},
              "faults": {"schedule": [
                  {"at": "0ms", "fault": "lose_reply", "replica": replica,
                   "call": "refund_many", "count": 3} for replica in (0, 1)]}},
    damage=("budget_minted_units",),
    exposed_by="reply_lost on refund_many",
)


class RetriesRefundsWithAFreshMarker(RedisStateStore):
    async def refund_many(self, refunds: Sequence[Refund]) -> None:
        refunds = tuple(refunds)
        if not refunds:
            return
        amounts = [str(refund_amount(refund.amount)) for refund in refunds]
        for _ in range(2):
            # The bug: a new marker per attempt, so the retry is no replay.
            marker = refund_marker_key(refunds[0].key, self.runtime.new_id())
            try:
                await self._refund_many(keys=[*(refund.key for refund in refunds), marker],
                                        args=amounts)
                return
            except UNREACHABLE:
                continue


KIND = register_mutant(MUTANT, store_class=RetriesRefundsWithAFreshMarker)
