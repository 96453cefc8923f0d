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
from stores.axond_budget.redis_budget import RedisBudget, decode_ledger_value, ledger_keys_v1
from stores.registry import StoreKind


async def _build_redis(data: Any, runtime: Any, settings: SharedSettings) -> RedisBudget:
    return await RedisBudget.connect(data, runtime, settings)


async def _build_in_memory(data: Any, runtime: Any, settings: InMemorySettings) -> InMemoryBudget:
    return InMemoryBudget(runtime, settings)


async def _build_none(data: Any, runtime: Any, settings: Any) -> NoBudget:
    return NoBudget()


def _in_memory_ledger(store: InMemoryBudget, key: BudgetKey) -> RecordedLedger:
    return store.ledger(key)


def _no_ledger(store: NoBudget, key: BudgetKey) -> RecordedLedger:
    return RecordedLedger(0, {})


KINDS = (
    StoreKind(
        name="axond_budget.redis_v1",
        summary="Redis, one Lua script per reserve/settle, subject cap (v1 layout)",
        protocol="budget",
        settings_model=SharedSettings,
        backends=("redis",),
        build=_build_redis,
        contract=contract,
        ledger_keys=ledger_keys_v1,
        decode=decode_ledger_value,
        read_ledger=None,
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
)
