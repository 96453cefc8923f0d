"""Mutant: a v2 settle whose reply was lost falls back to charging the subject
by hand (``INCRBY`` on the subject counter alone).

The bug is on the recovery path of a lost settle reply, in the v2 layout.
The seed: "The composite settlement: one hold released from both scopes and
the measured spend added to both counters, in one script. Exactly once per
scope, or not at all" (000_cfca2acab2180986.txt:169-171). When the script
ran and only its reply was lost, the fallback charges the subject a second
time and the namespace once: the two scopes disagree, and the subject's
budget is spent twice over.
"""

from __future__ import annotations

import contextlib

from mutants.budget import V2, FaultExposed, lose
from stores.axond_budget import redis_kind
from stores.axond_budget.contract import BudgetKey, Reservation
from stores.axond_budget.redis_budget import UNREACHABLE, RedisBudget, v2_keys
from stores.registry import register

MUTANT = FaultExposed(
    name="settle_v2_timeout_recharges_subject",
    derived_from="axond_budget.redis_v2",
    breaks="a v2 settle whose reply is lost charges the subject again by hand",
    seed="000_cfca2acab2180986.txt:169-171",
    scenario={**V2, "faults": {"schedule": lose("lose_reply", "settle_v2", count=2)}},
    exposing=("faults",),
    exposed_by="reply_lost on settle_v2",
)


class RechargesSubject(RedisBudget):
    async def settle(self, key: BudgetKey, reservation: Reservation,
                     actual_microdollars: int) -> None:
        if not reservation.is_held:
            return
        try:
            await self._settle(keys=self._keys(key), args=[reservation.id, actual_microdollars])
        except UNREACHABLE:
            with contextlib.suppress(*UNREACHABLE):
                subject_spent = v2_keys(self.settings.key_prefix, key).subject_spent
                await self.data.incrby(subject_spent, actual_microdollars)  # the bug


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, layout="v2",
                           store_class=RechargesSubject))
