"""Mutant (Python, migration): the carry clears a parked claim before it has
applied it.

The bug: ``carry`` claims a subject's v1 spend (parked beside its counter),
deletes the parked claim, and only then adds it to v2. A migration killed
between the delete and the apply loses that spend: the v1 counter is empty,
no claim is parked, and the re-run has nothing to finish. The seed clears a
claim only after applying it: "Only now is the parked claim done with"
(``000_cfca2acab2180986.txt:183-187``: "nothing is lost if this is where the
migration dies -- a re-run finds the same pending and finishes it").

Sound when nothing interrupts it; exposed by the lab killing the migration.
"""

from __future__ import annotations

from collections.abc import Sequence

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.axond_budget.contract import BudgetKey, SharedSettings
from stores.axond_budget.migration import (
    MigrationReport,
    apply_claim,
    claim_key,
    claim_v1_spend,
    migrate_redis,
)
from stores.axond_budget.redis_budget import SCRIPTS
from stores.ports import RedisPort
from stores.scripts import ScriptSet

MUTANT = Mutant(
    name="claim_dropped_before_apply",
    derived_from="axond_budget.redis_v2",
    breaks="the migration deletes each parked claim before applying it, so a run killed "
           "in between loses that spend",
    scenario="budget-exposed-migration-killed-mid-carry.toml",
    damage=("drift", "namespace_drift"),
    slot="migrations.0.to",
)


async def carry_dropping_the_claim_first(data: RedisPort, key_prefix: str, key: BudgetKey,
                                         scripts: ScriptSet = SCRIPTS) -> int:
    carried = 0
    while (claim := await claim_v1_spend(data, key_prefix, key, scripts)) is not None:
        # The bug: the parked claim is cleared before it is applied.
        await data.delete(claim_key(key_prefix, key))
        carried += await apply_claim(data, key_prefix, key, claim, scripts)
    return carried


async def migrate_dropping_claims_first(data: RedisPort, settings: SharedSettings,
                                        namespaces: Sequence[str],
                                        scripts: ScriptSet = SCRIPTS) -> MigrationReport:
    return await migrate_redis(data, settings, namespaces, carry=carry_dropping_the_claim_first,
                               scripts=scripts)


QUIET = {"migrations.0.crash_after_commands": None}
"""The migration left to finish: nothing to expose the bug."""


KIND = register_exposed(MUTANT, migration=migrate_dropping_claims_first)
