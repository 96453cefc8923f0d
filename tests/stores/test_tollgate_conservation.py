"""The funding equation holds after every operation of any sequence, on
``MemoryLedger``: ``tollgate_histories.LedgerHistory``'s random histories
(the PostgreSQL ledger runs them in ``test_tollgate_postgres_differential``,
side by side with this one)."""

from __future__ import annotations

from hypothesis import settings
from tollgate_histories import POLICY, LedgerHistory

from stores.tollgate.memory import MemoryLedger


class MemoryHistory(LedgerHistory):
    def make_ledger(self) -> MemoryLedger:
        return MemoryLedger(POLICY)


MemoryHistory.TestCase.settings = settings(max_examples=150, stateful_step_count=60,
                                           deadline=None)
test_the_funding_equation_holds_after_every_operation = MemoryHistory.TestCase
