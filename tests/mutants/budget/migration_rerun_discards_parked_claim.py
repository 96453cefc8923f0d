"""Mutant: a migration that takes a parked claim for a stale leftover and
deletes it before claiming afresh.

The bug is on the migration's recovery path: a run killed between claiming a
subject's spend and applying it leaves that spend parked, and the re-run
throws it away. The seed: "it is not yet *added* anywhere, so nothing is
lost if this is where the migration dies -- a re-run finds the same
`pending` and finishes it" (000_cfca2acab2180986.txt:183-187); "Claims a
migration took but did not finish applying ... nothing else accounts for
that spend" (447-451). This one loses it from the subject and the namespace.
"""

from __future__ import annotations

from collections.abc import Sequence

from mutants.budget import FaultExposed
from mutants.budget.scenarios import killed_migration
from stores.axond_budget import redis_kind
from stores.axond_budget.contract import BudgetKey, SharedSettings
from stores.axond_budget.migration import (
    MigrationReport,
    carry_forward,
    claim_key,
    migrate_redis,
)
from stores.ports import RedisPort
from stores.registry import register
from stores.scripts import ScriptSet

MUTANT = FaultExposed(
    name="migration_rerun_discards_parked_claim",
    derived_from="axond_budget.redis_v2",
    breaks="a migration deletes a parked claim as stale instead of finishing it",
    seed="000_cfca2acab2180986.txt:183-187",
    # Six commands of scans and the marker, then the first subject: killed
    # right after its claim (the eighth), before its apply.
    scenario=killed_migration(crash_after_commands=8),
    exposing=(),
    unexposed={"migrations": [{"crash_after_commands": None}]},
    exposed_by="migration_killed on migrate",
    slot="migrations.0.to",
)


async def carry_discarding_parked(data: RedisPort, key_prefix: str, key: BudgetKey,
                                  scripts: ScriptSet) -> int:
    await data.delete(claim_key(key_prefix, key))  # the bug: a parked claim is no leftover
    return await carry_forward(data, key_prefix, key, scripts)


async def migrate(data: RedisPort, settings: SharedSettings, namespaces: Sequence[str],
                  scripts: ScriptSet) -> MigrationReport:
    return await migrate_redis(data, settings, list(namespaces), carry=carry_discarding_parked,
                               scripts=scripts)


KIND = register(redis_kind(MUTANT.kind, MUTANT.breaks, layout="v2", migration=migrate))
