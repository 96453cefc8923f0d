"""Mutant (Lua): a reclaim that drops holds whose deadline is within a TTL of now."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="reclaims_live_holds",
    derived_from="axond_budget.redis_v1",
    breaks="the reclaim drops holds whose deadline <= now + TTL: every live hold",
    scenario="mutants/v1-busy-subjects.toml",
    replaces="live_holds",
    damage=("overshoot", "wrongful_admissions"),
)


KIND = register_redis_mutant(MUTANT)
