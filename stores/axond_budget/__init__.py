"""axond's spend budgets: reserve an estimate, then settle the actual spend.

Kinds registered for the lab (see ``stores.registry``):

* ``axond_budget.redis_v1`` — the shared Redis store, subject cap (layout v1);
* ``axond_budget.redis_v2`` — the same store with a namespace cap as well
  (layout v2), booting a fresh keyspace as migrated;
* ``axond_budget.in_memory`` — per-replica ledgers, no datastore;
* ``axond_budget.none`` — admits everything, holds nothing;
* ``axond_budget.variants.split_settlement`` — historical: settles in two
  commands, release then charge (``variants.SplitSettlement``);
* ``axond_budget.variants.no_reclaim`` — historical: never reclaims expired
  holds (``variants.NoReclaim``);
* ``axond_budget.variants.recomputed_namespace_total`` and
  ``axond_budget.variants.claim_without_slot`` — the v2 store reached by one
  of the two historical migrations (``variants.migrate_*``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stores.axond_budget import contract
from stores.axond_budget.contract import (
    BudgetKey,
    NamespaceCapSettings,
    NoBudget,
    NoSettings,
    RecordedLedger,
    SharedSettings,
    SubjectCapSettings,
)
from stores.axond_budget.in_memory import InMemoryBudget, InMemorySettings
from stores.axond_budget.migration import migrate_redis, stamp_fresh_keyspace
from stores.axond_budget.redis_budget import RedisBudget, decode_ledger_value, ledger_keys
from stores.axond_budget.variants import (
    NoReclaim,
    SplitSettlement,
    migrate_recomputing_namespace_totals,
    migrate_without_parked_claims,
)
from stores.registry import StoreKind


def _connecting(store_class: type[RedisBudget]) -> Any:
    """The ``build`` of a Redis kind: connect, passing the store's boot fences."""
    async def build(data: Any, runtime: Any, settings: SharedSettings) -> RedisBudget:
        return await store_class.connect(data, runtime, settings)
    return build


async def _build_redis_v2(data: Any, runtime: Any, settings: NamespaceCapSettings) -> RedisBudget:
    # A v2 store rightly refuses an unmarked keyspace (it may hold v1 spend not
    # yet carried), so a simulation starting on an empty prefix could never
    # serve. An operator would run the migration first, which on an empty
    # keyspace only stamps the marker; the lab does that here, and only when
    # nothing at all is under the prefix, so any other state is still judged
    # by the store's own boot fences.
    await stamp_fresh_keyspace(data, settings.key_prefix)
    return await RedisBudget.connect(data, runtime, settings)


def _redis_kind(name: str, summary: str, settings_model: type, build: Any,
                **extra: Any) -> StoreKind:
    """A kind of the Redis store family: its ledgers are read from Redis keys."""
    return StoreKind(name=name, summary=summary, protocol="budget",
                     settings_model=settings_model, backends=("redis",), build=build,
                     contract=contract, ledger_keys=ledger_keys, decode=decode_ledger_value,
                     read_ledger=None, package=__name__, **extra)


async def _build_in_memory(data: Any, runtime: Any, settings: InMemorySettings) -> InMemoryBudget:
    return InMemoryBudget(runtime, settings)


async def _build_none(data: Any, runtime: Any, settings: Any) -> NoBudget:
    return NoBudget()


def _in_memory_ledger(store: InMemoryBudget, key: BudgetKey) -> RecordedLedger:
    return store.ledger(key)


def _no_ledger(store: NoBudget, key: BudgetKey) -> RecordedLedger:
    return RecordedLedger(0, {})


KINDS = (
    _redis_kind("axond_budget.redis_v1",
                "Redis, one Lua script per reserve/settle, subject cap (v1 layout)",
                SubjectCapSettings, _connecting(RedisBudget)),
    _redis_kind("axond_budget.redis_v2",
                "Redis, one Lua script per reserve/settle, subject and namespace caps "
                "(v2 layout)", NamespaceCapSettings, _build_redis_v2, migrate=migrate_redis),
    StoreKind(
        name="axond_budget.in_memory",
        summary="per-replica in-memory ledgers (the cap is per replica)",
        protocol="budget",
        settings_model=InMemorySettings,
        backends=("memory",),
        build=_build_in_memory,
        contract=contract,
        ledger_keys=None,
        decode=None,
        read_ledger=_in_memory_ledger,
        package=__name__,
    ),
    StoreKind(
        name="axond_budget.none",
        summary="admits everything and holds nothing (no budget configured)",
        protocol="budget",
        settings_model=NoSettings,
        backends=("memory",),
        build=_build_none,
        contract=contract,
        ledger_keys=None,
        decode=None,
        read_ledger=_no_ledger,
        package=__name__,
    ),
    _redis_kind("axond_budget.variants.split_settlement",
                "historical: settles in two commands, release then charge (v1 layout); "
                "a lost reply between them releases without charging",
                SubjectCapSettings, _connecting(SplitSettlement)),
    _redis_kind("axond_budget.variants.no_reclaim",
                "historical: reserve never reclaims expired holds (v1 layout); "
                "a crashed replica's holds wedge the budget",
                SubjectCapSettings, _connecting(NoReclaim), holds_count_past_deadline=True),
)

_REDIS_V2 = next(kind for kind in KINDS if kind.name == "axond_budget.redis_v2")
# The two historical migrations differ from the fixed one only in the
# migration they run; the fleet they start is the fixed v2 store.
KINDS += (
    replace(_REDIS_V2, name="axond_budget.variants.recomputed_namespace_total",
            summary="historical: the v2 store, migrated by a migration that recomputes "
                    "namespace totals from subject sums (erases concurrent settlements)",
            migrate=migrate_recomputing_namespace_totals),
    replace(_REDIS_V2, name="axond_budget.variants.claim_without_slot",
            summary="historical: the v2 store, migrated by a migration that parks no claim "
                    "(a death between taking and adding the spend loses it)",
            migrate=migrate_without_parked_claims),
)

