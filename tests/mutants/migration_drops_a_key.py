"""Mutant (Python): a v1 -> v2 migration that drops one subject's spend instead of carrying it."""

from __future__ import annotations

from collections.abc import Sequence

from mutants import Mutant, register_redis_mutant
from stores.axond_budget.contract import BudgetKey, SharedSettings
from stores.axond_budget.migration import MigrationReport, carry_forward, migrate_redis
from stores.axond_budget.redis_budget import v1_keys
from stores.ports import RedisPort
from stores.scripts import ScriptSet

MUTANT = Mutant(
    name="migration_drops_a_key",
    derived_from="axond_budget.redis_v2",
    breaks="the v1 -> v2 migration deletes one subject's v1 spend counter without carrying it",
    scenario="mutants/migrate-v1-to-v2.toml",
    damage=("drift", "overshoot"),
    slot="migrations.0.to",
)

DROPPED_SUBJECT = "subject-0"
"""The subject whose spend is lost: a name the scenario's key space deals."""


async def carry_all_but_one(data: RedisPort, key_prefix: str, key: BudgetKey,
                            scripts: ScriptSet) -> int:
    if key.subject == DROPPED_SUBJECT:
        # The bug: the subject is taken for already carried and its counter
        # cleared as the holds hashes are.
        await data.delete(v1_keys(key_prefix, key)[0])
        return 0
    return await carry_forward(data, key_prefix, key, scripts)


async def migrate_dropping_a_key(data: RedisPort, settings: SharedSettings,
                                 namespaces: Sequence[str],
                                 scripts: ScriptSet) -> MigrationReport:
    return await migrate_redis(data, settings, namespaces, carry=carry_all_but_one,
                               scripts=scripts)


KIND = register_redis_mutant(MUTANT, migration=migrate_dropping_a_key)
