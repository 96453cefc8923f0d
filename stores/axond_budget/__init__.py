"""axond's spend budgets: reserve an estimate, then settle the actual spend.

Kinds registered for the lab (see ``stores.registry``):

* ``axond_budget.redis_v1`` — the shared Redis store, subject cap (layout v1);
* ``axond_budget.in_memory`` — per-replica ledgers, no datastore;
* ``axond_budget.none`` — admits everything, holds nothing.
"""

from __future__ import annotations

from typing import Any

from stores.axond_budget import contract
from stores.axond_budget.contract import (
    BudgetKey,
    NoBudget,
    NoSettings,
    RecordedLedger,
    SharedSettings,
)
from stores.axond_budget.in_memory import InMemoryBudget, InMemorySettings
from stores.axond_budget.redis_budget import RedisBudget, recorded_v1
from stores.registry import StoreKind


async def _build_redis(data: Any, runtime: Any, settings: SharedSettings) -> RedisBudget:
    return await RedisBudget.connect(data, runtime, settings)


async def _build_in_memory(data: Any, runtime: Any, settings: InMemorySettings) -> InMemoryBudget:
    return InMemoryBudget(runtime, settings)


async def _build_none(data: Any, runtime: Any, settings: Any) -> NoBudget:
    return NoBudget()


def _recorded_in_memory(stores: list[InMemoryBudget], settings: InMemorySettings,
                        key: BudgetKey, now_ms: int) -> RecordedLedger:
    # Each replica keeps its own ledger: the fleet's record is their sum.
    return RecordedLedger(
        spent_microdollars=sum(store.spent(key) for store in stores),
        held_microdollars=sum(store.live_outstanding(key, now_ms) for store in stores),
    )


def _recorded_nothing(source: Any, settings: Any, key: BudgetKey, now_ms: int) -> RecordedLedger:
    return RecordedLedger(0, 0)


KINDS = (
    StoreKind(
        name="axond_budget.redis_v1",
        summary="Redis, one Lua script per reserve/settle, subject cap (v1 layout)",
        protocol="budget",
        settings_model=SharedSettings,
        backends=("redis",),
        build=_build_redis,
        contract=contract,
        inspect=recorded_v1,
        package=__name__,
    ),
    StoreKind(
        name="axond_budget.in_memory",
        summary="per-replica in-memory ledgers (the cap is per replica)",
        protocol="budget",
        settings_model=InMemorySettings,
        backends=("memory",),
        build=_build_in_memory,
        contract=contract,
        inspect=_recorded_in_memory,
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
        inspect=_recorded_nothing,
        package=__name__,
    ),
)
