"""axond's spend budgets: reserve an estimate, then settle the actual spend.

Kinds registered for the lab (see ``stores.registry``):

* ``axond_budget.redis_v1`` — the shared Redis store, subject cap (layout v1);
* ``axond_budget.redis_v2`` — the same store with a namespace cap as well
  (layout v2), booting a fresh keyspace as migrated;
* ``axond_budget.in_memory`` — per-replica ledgers, no datastore;
* ``axond_budget.none`` — admits everything, holds nothing;
* ``axond_budget.variants.split_settlement`` — historical: settles in two
  commands, release then charge (``variants.SplitSettlement``);
* ``axond_budget.variants.untagged_keys`` and
  ``axond_budget.variants.subject_tagged_v2`` — historical: keys that a
  cluster puts in two slots, v1 without its hash tag and v2 with subject
  keys under their own (``variants.UntaggedKeys``, ``variants.SubjectTaggedV2``);
  they break only on a cluster (``[server] cluster``);
* ``axond_budget.variants.no_reclaim`` — historical: never reclaims expired
  holds (``variants.NoReclaim``);
* ``axond_budget.variants.start_time_reservation_ids`` — historical:
  reservation ids unique per process only (``variants.StartTimeReservationIds``);
* ``axond_budget.variants.recomputed_namespace_total``,
  ``axond_budget.variants.claim_without_slot``,
  ``axond_budget.variants.guessed_attribution``,
  ``axond_budget.variants.sequences_dropped_first`` and
  ``axond_budget.variants.unmarked_migration`` — the v2 store reached by
  one of the five historical migrations (``variants.migrate_*``).

A plugin registers a kind of its own with ``redis_kind`` (a ``RedisBudget``
subclass, or the shipped class with some of ``SCRIPTS`` replaced).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

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
from stores.axond_budget.redis_budget import (
    SCRIPTS,
    RedisBudget,
    decode_ledger_value,
)
from stores.axond_budget.variants import (
    NoReclaim,
    SplitSettlement,
    StartTimeReservationIds,
    SubjectTaggedV2,
    UntaggedKeys,
    migrate_attributing_by_guesswork,
    migrate_dropping_sequences_first,
    migrate_recomputing_namespace_totals,
    migrate_without_a_migrating_marker,
    migrate_without_parked_claims,
)
from stores.registry import StoreKind
from stores.scripts import ScriptSet

__all__ = ["KINDS", "SCRIPTS", "RedisBudget", "redis_kind"]


Migration = Callable[..., Awaitable[Any]]
"""``migration(data, settings, namespaces, scripts=...)``: an operator's
migration into the v2 layout (``migrate_redis`` or a historical variant's)."""


def redis_kind(name: str, summary: str, *, layout: Literal["v1", "v2"] = "v1",
               store_class: type[RedisBudget] = RedisBudget, scripts: ScriptSet | None = None,
               migration: Migration = migrate_redis,
               holds_count_past_deadline: bool = False) -> StoreKind:
    """A kind of the Redis budget store, shipped or a plugin's: ``store_class``
    (``RedisBudget`` or a subclass) running ``scripts`` (default: the class's
    own) in ``layout`` -- ``"v1"``, the subject cap, or ``"v2"``, subject and
    namespace caps, whose fleet boots a fresh keyspace as migrated and whose
    operators run ``migration`` with the same scripts. Its ``build``,
    ``migrate`` and ``scripts`` agree, so the lab names every call it sends by
    the script it came from."""
    sources = store_class.scripts if scripts is None else scripts

    async def build(data: Any, runtime: Any, settings: SharedSettings) -> RedisBudget:
        if layout == "v2":
            # A v2 store rightly refuses an unmarked keyspace (it may hold v1
            # spend not yet carried), so a simulation starting on an empty
            # prefix could never serve. An operator would run the migration
            # first, which on an empty keyspace only stamps the marker; the lab
            # does that here, and only when nothing at all is under the prefix,
            # so any other state is still judged by the store's own boot fences.
            await stamp_fresh_keyspace(data, settings.key_prefix)
        return await store_class.connect(data, runtime, settings, sources)

    async def migrate(data: Any, settings: SharedSettings, namespaces: Any) -> Any:
        return await migration(data, settings, namespaces, scripts=sources)

    v2 = layout == "v2"
    return StoreKind(name=name, summary=summary, protocol="budget",
                     settings_model=NamespaceCapSettings if v2 else SubjectCapSettings,
                     backends=("redis",), build=build, contract=contract,
                     ledger_keys=store_class.ledger_keys, decode=decode_ledger_value,
                     read_ledgers=None,
                     scripts=sources, migrate=migrate if v2 else None,
                     holds_count_past_deadline=holds_count_past_deadline,
                     with_scripts=lambda other, scripts: redis_kind(
                         other, summary, layout=layout, store_class=store_class,
                         scripts=scripts, migration=migration,
                         holds_count_past_deadline=holds_count_past_deadline),
                     classes=(store_class,),
                     with_classes=lambda other, swaps: redis_kind(
                         other, summary, layout=layout,
                         store_class=swaps.get(store_class, store_class), scripts=sources,
                         migration=migration,
                         holds_count_past_deadline=holds_count_past_deadline))


async def _build_in_memory(data: Any, runtime: Any, settings: InMemorySettings) -> InMemoryBudget:
    return InMemoryBudget(runtime, settings)


async def _build_none(data: Any, runtime: Any, settings: Any) -> NoBudget:
    return NoBudget()


def _in_memory_ledgers(store: InMemoryBudget) -> dict[BudgetKey, RecordedLedger]:
    return {key: store.ledger(key) for key in store.ledger_keys()}


def _no_ledgers(store: NoBudget) -> dict[BudgetKey, RecordedLedger]:
    return {}


KINDS = (
    redis_kind("axond_budget.redis_v1",
               "Redis, one Lua script per reserve/settle, subject cap (v1 layout)"),
    redis_kind("axond_budget.redis_v2",
               "Redis, one Lua script per reserve/settle, subject and namespace caps "
               "(v2 layout)", layout="v2"),
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
        read_ledgers=_in_memory_ledgers,
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
        read_ledgers=_no_ledgers,
    ),
    redis_kind("axond_budget.variants.split_settlement",
               "historical: settles in two commands, release then charge (v1 layout); "
               "a lost reply between them releases without charging",
               store_class=SplitSettlement),
    redis_kind("axond_budget.variants.untagged_keys",
               "historical: v1 keys named without their {namespace|subject} hash tag; "
               "on a cluster a budget's two keys land in two slots (CROSSSLOT)",
               store_class=UntaggedKeys),
    redis_kind("axond_budget.variants.subject_tagged_v2",
               "historical: v2 subject keys under a tag of their own, not the "
               "namespace's; on a cluster a v2 script spans two slots (CROSSSLOT)",
               layout="v2", store_class=SubjectTaggedV2),
    redis_kind("axond_budget.variants.no_reclaim",
               "historical: reserve never reclaims expired holds (v1 layout); "
               "a crashed replica's holds wedge the budget",
               store_class=NoReclaim, holds_count_past_deadline=True),
    redis_kind("axond_budget.variants.start_time_reservation_ids",
               "historical: reservation ids of the process's first-reserve time and a "
               "counter (v1 layout); replicas starting in one tick overwrite each other's holds",
               store_class=StartTimeReservationIds),
    # The historical migrations differ from the fixed one only in the
    # migration they run; the fleet they start is the fixed v2 store.
    redis_kind("axond_budget.variants.recomputed_namespace_total",
               "historical: the v2 store, migrated by a migration that recomputes "
               "namespace totals from subject sums (erases concurrent settlements)",
               layout="v2", migration=migrate_recomputing_namespace_totals),
    redis_kind("axond_budget.variants.claim_without_slot",
               "historical: the v2 store, migrated by a migration that parks no claim "
               "(a death between taking and adding the spend loses it)",
               layout="v2", migration=migrate_without_parked_claims),
    redis_kind("axond_budget.variants.guessed_attribution",
               "historical: the v2 store, migrated by a migration that splits each v1 tag at "
               "its first '|' (a namespace id with a '|' loses its spend to another)",
               layout="v2", migration=migrate_attributing_by_guesswork),
    redis_kind("axond_budget.variants.sequences_dropped_first",
               "historical: the v2 store, migrated by a migration that drops claim sequences "
               "before the records of applied claims (a death between drops later stray spend)",
               layout="v2", migration=migrate_dropping_sequences_first),
    redis_kind("axond_budget.variants.unmarked_migration",
               "historical: the v2 store, migrated by a migration that stamps no "
               "mid-migration marker (a run that dies part-way lets a v1 gateway boot)",
               layout="v2", migration=migrate_without_a_migrating_marker),
)
