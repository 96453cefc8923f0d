"""Mutant (Lua): a v2 settle that never charges the namespace's counter."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="namespace_total_not_incremented",
    derived_from="axond_budget.redis_v2",
    breaks="v2 settle charges the subject's counter but skips the namespace's",
    scenario="mutants/v2-namespace-cap-binds.toml",
    replaces="settle_v2",
    damage=("namespace_drift", "namespace_overshoot"),
)


KIND = register_redis_mutant(MUTANT)
