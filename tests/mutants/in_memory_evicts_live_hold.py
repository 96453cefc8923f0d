"""Mutant (Python, in-memory): pruning evicts idle ledgers even while they hold."""

from __future__ import annotations

from typing import Any

from mutants import Mutant, register_mutant
from stores.axond_budget.in_memory import InMemoryBudget, InMemorySettings

MUTANT = Mutant(
    name="in_memory_evicts_live_hold",
    derived_from="axond_budget.in_memory",
    breaks="pruning evicts a ledger untouched for idle_ttl even when it still has live holds",
    scenario="mutants/in-memory-eviction.toml",
    damage=("overshoot", "wrongful_admissions"),
)


class InMemoryEvictsLiveHold(InMemoryBudget):
    def _prune(self, namespace: str) -> None:
        # The bug: idleness alone makes a ledger evictable; its live holds
        # (a request still running) are dropped as if it held nothing.
        now = self._runtime.now_ms()
        for ledger in self._ledgers.values():
            if now - ledger.last_touched_ms > self._settings.idle_ttl_ms:
                ledger.holds.clear()
        super()._prune(namespace)


async def build(data: Any, runtime: Any, settings: InMemorySettings) -> InMemoryBudget:
    return InMemoryEvictsLiveHold(runtime, settings)


KIND = register_mutant(MUTANT, build=build)
