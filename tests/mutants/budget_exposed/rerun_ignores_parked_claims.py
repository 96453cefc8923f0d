"""Mutant (Python, migration): a re-run that looks only at v1 counters, not
at the claims an interrupted run parked.

The bug: the migration lists the v1 subjects to carry from their spend
counters alone. A claim parked by a run that died between claiming a
subject's spend and applying it is no longer under a v1 counter, so the
re-run never finishes it: that subject's spend is gone from both layouts
and its caps let it be spent again. The seed's migration scans the parked
claims too, "A claim an earlier run took but did not finish applying"
(``000_cfca2acab2180986.txt:599-611``), which is what makes it resumable
(``000_cfca2acab2180986.txt:183-187``).

Sound when nothing interrupts it; exposed by the lab killing the migration.
"""

from __future__ import annotations

from collections.abc import Sequence

from mutants import Mutant
from mutants.budget_exposed import register_exposed
from stores.axond_budget.contract import BudgetKey, SharedSettings
from stores.axond_budget.migration import (
    MigrationReport,
    applied_claims_key,
    attribute_v1_key,
    carry_forward,
    collect,
    require_namespace_cap,
    sequence_key,
)
from stores.axond_budget.redis_budget import (
    LAYOUT_MIGRATING,
    LAYOUT_V2,
    SCRIPTS,
    layout_key,
    v1_patterns,
)
from stores.ports import RedisPort
from stores.scripts import ScriptSet

MUTANT = Mutant(
    name="rerun_ignores_parked_claims",
    derived_from="axond_budget.redis_v2",
    breaks="the migration carries the subjects it finds under v1 counters only, so a "
           "re-run never finishes a claim an interrupted run parked",
    scenario="budget-exposed-migration-killed-after-claim.toml",
    damage=("drift", "namespace_drift"),
    slot="migrations.0.to",
)


async def migrate_ignoring_parked_claims(data: RedisPort, settings: SharedSettings,
                                         namespaces: Sequence[str],
                                         scripts: ScriptSet = SCRIPTS) -> MigrationReport:
    require_namespace_cap(settings)
    prefix = settings.key_prefix
    spent_pattern, holds_pattern = v1_patterns(prefix)
    # The bug: no scan for parked claims.
    subjects: dict[BudgetKey, None] = {
        attribute_v1_key(prefix, redis_key, ":spent", namespaces): None
        for redis_key in await collect(data, spent_pattern)}
    holds_keys = await collect(data, holds_pattern)
    if subjects or holds_keys:
        await data.set(layout_key(prefix), LAYOUT_MIGRATING)
    carried = 0
    for key in subjects:
        carried += await carry_forward(data, prefix, key, scripts)
    for redis_key in holds_keys:
        await data.delete(redis_key)
    touched = {key.namespace for key in subjects}
    for namespace in sorted(touched):
        await data.delete(applied_claims_key(prefix, namespace))
    for key in subjects:
        await data.delete(sequence_key(prefix, key))
    await data.set(layout_key(prefix), LAYOUT_V2)
    return MigrationReport(subjects=len(subjects), reservation_hashes=len(holds_keys),
                           namespaces=len(touched), carried_microdollars=carried)


QUIET = {"migrations.0.crash_after_commands": None}
"""The migration left to finish: nothing to expose the bug."""


KIND = register_exposed(MUTANT, migration=migrate_ignoring_parked_claims)
