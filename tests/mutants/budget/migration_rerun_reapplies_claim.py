"""Mutant: a migration that adds each parked claim to the v2 counters with
plain ``INCRBY`` instead of the apply script that records the claim's token.

The bug is on the migration's recovery path: a run killed after adding a
claim and before dropping it leaves the claim parked, and the re-run adds it
again. The seed: "Step two: **add** a claimed batch to the v2 counters, at
most once ... A repeated (or resumed) apply is a no-op"
(000_cfca2acab2180986.txt:207-216), so "an interrupted run loses nothing and
a re-run double-counts nothing" (567-570). This one counts the interrupted
subject's spend twice, in the subject and in the namespace.
"""

from __future__ import annotations

from collections.abc import Sequence

from mutants.budget import FaultExposed
from mutants.budget.scenarios import killed_migration
from stores.axond_budget import redis_kind
from stores.axond_budget.contract import BudgetKey, SharedSettings
from stores.axond_budget.migration import (
    MigrationReport,
    claim_key,
    claim_v1_spend,
    migrate_redis,
)
from stores.axond_budget.redis_budget import v2_keys
from stores.ports import RedisPort
from stores.registry import register
from stores.scripts import ScriptSet

MUTANT = FaultExposed(
    name="migration_rerun_reapplies_claim",
    derived_from="axond_budget.redis_v2",
    breaks="a migration adds parked claims without recording them, so a re-run adds them again",
    seed="000_cfca2acab2180986.txt:207-216",
    # Six commands of scans and the marker, then the first subject: killed
    # after its claim and both INCRBYs (the ninth), before its claim is dropped.
    scenario=killed_migration(crash_after_commands=9),
    exposing=(),
    unexposed={"migrations": [{"crash_after_commands": None}]},
    exposed_by="migration_killed on migrate",
    slot="migrations.0.to",
)


async def carry_without_a_token(data: RedisPort, key_prefix: str, key: BudgetKey,
                                scripts: ScriptSet) -> int:
    carried = 0
    while (claim := await claim_v1_spend(data, key_prefix, key, scripts)) is not None:
        target = v2_keys(key_prefix, key)
        # The bug: no record that this claim was applied.
        await data.incrby(target.subject_spent, claim.amount_microdollars)
        await data.incrby(target.namespace_spent, claim.amount_microdollars)
        carried += claim.amount_microdollars
        await data.delete(claim_key(key_prefix, key))
    return carried


async def migrate(data: RedisPort, settings: SharedSettings, namespaces: Sequence[str],
                  scripts: ScriptSet) -> MigrationReport:
    return await migrate_redis(data, settings, list(namespaces), carry=carry_without_a_token,
                               scripts=scripts)


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, layout="v2", migration=migrate))
