"""Mutant (Lua): a v2 reserve that writes the subject hold before checking the namespace cap."""

from __future__ import annotations

from mutants import Mutant, register_redis_mutant

MUTANT = Mutant(
    name="v2_writes_subject_hold_before_namespace_check",
    derived_from="axond_budget.redis_v2",
    breaks="v2 reserve writes the subject hold, then checks the namespace cap: "
           "a namespace denial leaves the subject hold behind",
    scenario="mutants/v2-namespace-cap-binds.toml",
    replaces="reserve_v2",
    damage=("leaks",),
)


KIND = register_redis_mutant(MUTANT)
