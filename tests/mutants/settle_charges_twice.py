"""Mutant (Lua): a v1 settle that charges the actual spend twice."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="settle_charges_twice",
    derived_from="axond_budget.redis_v1",
    breaks="settle drops the hold and charges the actual spend twice",
    scenario="mutants/v1-busy-subjects.toml",
    replaces="settle_v1",
    damage=("drift", "false_denials"),
)


KIND = register_redis_mutant(MUTANT)
