"""Mutant (Lua): a v1 settle that charges the spend and forgets to drop the hold."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="settle_forgets_hold",
    derived_from="axond_budget.redis_v1",
    breaks="settle charges the actual spend but never deletes the hold",
    scenario="mutants/v1-busy-subjects.toml",
    replaces="settle_v1",
    damage=("leaks", "false_denials"),
)


KIND = register_redis_mutant(MUTANT)
