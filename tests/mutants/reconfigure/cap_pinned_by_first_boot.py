"""Mutant (v1 budget): the subject cap is the one the first replica published.

The bug: at boot a replica publishes its configured subject cap under the
store's prefix unless one is there already, and every replica enforces the
published cap, not its own. A fleet never reconfigured runs as the fixed
store does; an operator's new cap never reaches the script, so a lowered
cap is overshot by every replica and a raised one refuses what the new cap
has room for. The seed's reserve reads the caps afresh for each request
from what is published now, so a new publication binds the next request
(``000_cfca2acab2180986.txt:842-866``), and its script takes the cap it is
given (``000_cfca2acab2180986.txt:81-83``).
"""

from __future__ import annotations

from mutants.reconfigure import ReconfigureMutant
from stores.axond_budget import redis_kind
from stores.axond_budget.redis_budget import RedisBudget
from stores.registry import register

MUTANT = ReconfigureMutant(
    name="cap_pinned_by_first_boot",
    derived_from="axond_budget.redis_v1",
    breaks="enforces the subject cap the first replica published, never a reloaded one",
    scenario="reconfigure-budget-quiet.toml",
    reconfigure={"at": "800ms", "fault": "reconfigure", "every": "50ms",
                 "settings": {"subject_cap_microdollars": 2_000}},
    damage=("wrongful_admissions", "cap_overshoot_microdollars_total"),
)


class CapPinnedByFirstBoot(RedisBudget):
    @classmethod
    async def connect(cls, data, runtime, settings, scripts=None) -> RedisBudget:
        store = await super().connect(data, runtime, settings, scripts)
        published = f"{settings.key_prefix}:config:subject_cap"
        pinned = await data.get(published)
        if pinned is None:
            await data.set(published, settings.subject_cap_microdollars)
            pinned = settings.subject_cap_microdollars
        store._caps[0] = int(pinned)  # the bug: the published cap, not its own
        return store


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, store_class=CapPinnedByFirstBoot))
