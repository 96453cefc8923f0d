"""Mutant (leases): ``max_in_flight`` is the one the first replica published.

The bug: at boot a replica publishes its configured ``max_in_flight`` under
the store's prefix unless one is there already, and every replica's acquire
counts against the published limit, not its own. A fleet never reconfigured
runs as the fixed store does; after an operator lowers the limit, every
replica still admits up to the old one. The seed's acquire script counts
against the limit it is given (``002_348438d99c360737.txt:24-41``), which
each invoke passes from its limiter's own ``max_in_flight``
(``002_348438d99c360737.txt:514-535``).
"""

from __future__ import annotations

from mutants.reconfigure import ReconfigureMutant
from stores.axond_leases import LeaseLimiter, redis_kind
from stores.registry import register

MUTANT = ReconfigureMutant(
    name="limit_pinned_by_first_boot",
    derived_from="axond_leases.redis",
    breaks="counts against the max_in_flight the first replica published, never a reloaded one",
    scenario="reconfigure-leases-quiet.toml",
    reconfigure={"at": "800ms", "fault": "reconfigure", "every": "50ms",
                 "settings": {"max_in_flight": 2}},
    damage=("concurrency_excess_lease_seconds",),
)


class LimitPinnedByFirstBoot(LeaseLimiter):
    @classmethod
    async def connect(cls, connector, runtime, settings, scripts=None) -> LeaseLimiter:
        connection = await connector.connect()
        published = f"{settings.key_prefix}:config:max_in_flight"
        try:
            pinned = await connection.get(published)
            if pinned is None:
                await connection.set(published, settings.max_in_flight)
                pinned = settings.max_in_flight
        finally:
            await connection.aclose()
        # The bug: the published limit, not its own.
        settings = settings.model_copy(update={"max_in_flight": int(pinned)})
        return await super().connect(connector, runtime, settings, scripts)


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, store_class=LimitPinnedByFirstBoot))
