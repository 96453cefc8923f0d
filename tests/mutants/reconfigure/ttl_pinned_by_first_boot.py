"""Mutant (v1 budget): holds get the reservation TTL the first replica published.

The bug: at boot a replica publishes its configured reservation TTL under
the store's prefix unless one is there already, and every replica writes its
holds with the published TTL, not its own. A fleet never reconfigured runs
as the fixed store does; after an operator shortens the TTL, a crashed
replica's holds still wedge the cap for the old, longer TTL. The seed's
reserve reads the TTL afresh for each request from what is published now
(``000_cfca2acab2180986.txt:842-860``) and writes each hold's deadline as
``now + ttl_ms`` (``000_cfca2acab2180986.txt:105``).
"""

from __future__ import annotations

from mutants.reconfigure import ReconfigureMutant
from stores.axond_budget import redis_kind
from stores.axond_budget.redis_budget import RedisBudget
from stores.registry import register

MUTANT = ReconfigureMutant(
    name="ttl_pinned_by_first_boot",
    derived_from="axond_budget.redis_v1",
    breaks="writes holds with the reservation TTL the first replica published, never a "
           "reloaded one",
    scenario="reconfigure-budget-quiet.toml",
    reconfigure={"at": "300ms", "fault": "reconfigure", "every": "50ms",
                 "settings": {"reservation_ttl": "100ms"}},
    damage=("leaked_hold_microdollar_seconds", "false_denials"),
    also=tuple({"at": "1200ms", "fault": "crash", "replica": replica, "restart_after": "100ms"}
               for replica in range(3)),
)


class TtlPinnedByFirstBoot(RedisBudget):
    @classmethod
    async def connect(cls, data, runtime, settings, scripts=None) -> RedisBudget:
        published = f"{settings.key_prefix}:config:reservation_ttl_ms"
        pinned = await data.get(published)
        if pinned is None:
            await data.set(published, settings.reservation_ttl_ms)
            pinned = settings.reservation_ttl_ms
        # The bug: the published TTL, not its own.
        settings = settings.model_copy(update={"reservation_ttl_ms": int(pinned)})
        return await super().connect(data, runtime, settings, scripts)


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, store_class=TtlPinnedByFirstBoot))
