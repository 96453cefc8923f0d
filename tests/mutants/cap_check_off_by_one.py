"""Mutant (Lua): a v1 reserve whose cap check is off by one request."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="cap_check_off_by_one",
    derived_from="axond_budget.redis_v1",
    breaks="reserve admits while settled + holds <= cap, i.e. one estimate past the cap",
    scenario="mutants/v1-busy-subjects.toml",
    replaces="reserve_v1",
    damage=("overshoot", "wrongful_admissions"),
)


KIND = register_redis_mutant(MUTANT)
