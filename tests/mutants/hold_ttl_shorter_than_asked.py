"""Mutant (Python): a store that holds for half the reservation TTL it is configured with."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant
from stores.axond_budget.contract import SharedSettings
from stores.axond_budget.redis_budget import RedisBudget
from stores.ports import RedisPort, Runtime
from stores.scripts import ScriptSet

MUTANT = Mutant(
    name="hold_ttl_shorter_than_asked",
    derived_from="axond_budget.redis_v1",
    breaks="reserve writes holds that expire after half the configured reservation TTL",
    scenario="mutants/v1-ttl-between-durations.toml",
    damage=("overshoot", "wrongful_admissions"),
)


class HoldTtlShorterThanAsked(RedisBudget):
    def __init__(self, data: RedisPort, runtime: Runtime, settings: SharedSettings,
                 scripts: ScriptSet | None = None) -> None:
        # The bug: a unit slip halves the TTL the scripts are given.
        halved = settings.model_copy(
            update={"reservation_ttl_ms": settings.reservation_ttl_ms // 2})
        super().__init__(data, runtime, halved, scripts)


KIND = register_redis_mutant(MUTANT, store_class=HoldTtlShorterThanAsked)
