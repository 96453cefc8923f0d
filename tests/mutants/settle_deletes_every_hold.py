"""Mutant (Lua): a v1 settle that deletes the subject's whole holds hash."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="settle_deletes_every_hold",
    derived_from="axond_budget.redis_v1",
    breaks="settle deletes the subject's whole holds hash, not just its own hold",
    scenario="mutants/v1-busy-subjects.toml",
    replaces="settle_v1",
    damage=("overshoot", "wrongful_admissions"),
)


KIND = register_redis_mutant(MUTANT)
