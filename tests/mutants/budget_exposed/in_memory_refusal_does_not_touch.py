"""Mutant (Python, in-memory): a refused reserve does not count as use of
its ledger.

The bug: the reserve touches a ledger (``last_touched``) only when it admits.
A subject that has spent its cap and keeps asking is refused every time, so
its ledger looks idle; when the lab's idle eviction needs room (``idle_ttl``,
``max_subjects``), it evicts that ledger and forgives its spend, and the
subject spends its cap again. The seed touches the ledger before deciding,
so "an active subject keeps its spend" (``001_25c2cca22987a5cc.txt:448-455``;
the test ``an_active_ledger_keeps_its_spend_under_the_idle_ttl``,
``001_25c2cca22987a5cc.txt:933-951``); a ledger may be evicted only when it
holds nothing and nothing used it for ``idle_ttl``
(``001_25c2cca22987a5cc.txt:305-316``).

Sound without capacity pressure; exposed by the lab's idle eviction, on the
refusal path.
"""

from __future__ import annotations

from typing import Any

from mutants import Mutant, register_mutant
from stores.axond_budget.contract import Admission, BudgetKey
from stores.axond_budget.in_memory import InMemoryBudget, InMemorySettings

MUTANT = Mutant(
    name="in_memory_refusal_does_not_touch",
    derived_from="axond_budget.in_memory",
    breaks="a refused reserve leaves its ledger's last use as it was, so a subject refused "
           "all along is evicted as idle and its spend forgiven",
    scenario="budget-exposed-in-memory-refused-then-evicted.toml",
    damage=("overshoot", "wrongful_admissions"),
)

QUIET = {"store_settings.max_subjects": 10}
"""Room for every ledger: no pruning, nothing to expose the bug."""


class RefusalDoesNotTouch(InMemoryBudget):
    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        ledger = self._ledgers.get(key)
        touched = None if ledger is None else ledger.last_touched_ms
        admission = await super().reserve(key, estimated_microdollars)
        if not admission.is_allowed and touched is not None and key in self._ledgers:
            # The bug: a refusal is not use.
            self._ledgers[key].last_touched_ms = touched
        return admission


async def build(data: Any, runtime: Any, settings: InMemorySettings) -> InMemoryBudget:
    return RefusalDoesNotTouch(runtime, settings)


KIND = register_mutant(MUTANT, build=build)
