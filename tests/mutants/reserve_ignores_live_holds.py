"""Mutant (Lua): a v1 reserve that decides without counting the live holds."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="reserve_ignores_live_holds",
    derived_from="axond_budget.redis_v1",
    breaks="reserve compares settled spend + estimate with the cap, leaving live holds out",
    scenario="mutants/v1-busy-subjects.toml",
    replaces="reserve_v1",
    damage=("overshoot", "wrongful_admissions"),
)


KIND = register_redis_mutant(MUTANT)
