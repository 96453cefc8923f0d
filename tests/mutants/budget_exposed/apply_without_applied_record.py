"""Mutant (Lua, migration): a claim's apply that keeps no record of having
been applied.

The bug: ``migration_apply`` increments both v2 counters without recording
the claim's token. A migration killed after applying a claim but before
clearing it leaves the claim parked; the re-run hands it back and applies it
again, so that subject's spend is counted twice in both scopes and its
caps deny what they had room for. The seed applies a claim "at most once"
by recording its token with the increment (``000_cfca2acab2180986.txt:
207-216``; the test ``2020-2052``, "replaying it must not charge twice").

Sound when nothing interrupts it; exposed by the lab killing the migration.
"""

from __future__ import annotations

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.scripts import Patch

MUTANT = Mutant(
    name="apply_without_applied_record",
    derived_from="axond_budget.redis_v2",
    breaks="a migration's apply records no token, so a resumed run applies a claim twice",
    scenario="budget-exposed-migration-killed-after-apply.toml",
    damage=("drift", "namespace_drift"),
    slot="migrations.0.to",
    replaces="migration_apply",
)


QUIET = {"migrations.0.crash_after_commands": None}
"""The migration left to finish: nothing to expose the bug."""


KIND = register_exposed(MUTANT, Patch(
    "-- Recording the token is the test: it succeeds only the first time.\n"
    "local first_time = redis.call('HSETNX', KEYS[3], token, claimed)\n"
    "if first_time == 0 then\n"
    "  return 0\n"
    "end\n",
    # The bug: no record read or written, so a resumed run applies it again.
    ""))
