"""PostgreSQL answers every call as memory does: random histories on both side by side.

``LedgerHistory`` (the conservation test's random histories: every trait
call, duplicates and stale tokens, admin calls, rollovers, a moving clock)
drives a ``Twin`` that makes each call on ``MemoryLedger`` and on
``PostgresLedger`` and requires the same outcome: the same value, or the same
exception class with the same evidence. After every step both ledgers must
hold the same books: every account's view and funding terms, every lease.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings
from hypothesis.stateful import invariant, run_state_machine_as_test
from tollgate_histories import ACCOUNTS, POLICY, LedgerHistory
from tollgate_ledgers import open_postgres, run

from stores.tollgate.memory import MemoryLedger
from stores.tollgate.postgres import PostgresLedger


@dataclass(frozen=True)
class Outcome:
    """What a call came to: its value, or its refusal's class, arguments and
    evidence (the exception itself is kept to re-raise, not compared)."""

    value: Any = None
    refusal: tuple[type[BaseException], tuple[Any, ...], Any] | None = None
    error: BaseException | None = field(default=None, compare=False)

    @classmethod
    async def of(cls, call: Awaitable[Any]) -> Outcome:
        try:
            return cls(value=await call)
        except Exception as error:  # every refusal, and any failure, is compared
            return cls(refusal=(type(error), error.args, getattr(error, "evidence", None)),
                       error=error)

    def unwrap(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class Twin:
    """Both ledgers as one: each call is made on memory then on PostgreSQL,
    must come to the same ``Outcome``, and answers as memory did."""

    def __init__(self, memory: MemoryLedger, postgres: PostgresLedger) -> None:
        self.memory = memory
        self.postgres = postgres

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def both(*args: Any) -> Any:
            expected = await Outcome.of(getattr(self.memory, name)(*args))
            actual = await Outcome.of(getattr(self.postgres, name)(*args))
            assert actual == expected, (
                f"{name}{args}: PostgreSQL came to {actual}, memory to {expected}")
            return expected.unwrap()
        return both


class DifferentialHistory(LedgerHistory):
    dsn = ""

    def make_ledger(self) -> Twin:
        return Twin(MemoryLedger(POLICY), open_postgres(self.dsn, POLICY))

    def teardown(self) -> None:
        run(self.ledger.postgres.drop())

    @invariant()
    def both_hold_the_same_books(self) -> None:
        memory, postgres = self.ledger.memory, self.ledger.postgres
        assert run(postgres.account_ids()) == run(memory.account_ids())
        for account in ACCOUNTS:
            assert run(postgres.account_view(account)) == run(memory.account_view(account))
        assert run(postgres.lease_views()) == run(memory.lease_views())


def test_postgres_answers_every_call_and_holds_the_books_as_memory_does(postgres_server):
    DifferentialHistory.dsn = postgres_server.dsn
    run_state_machine_as_test(DifferentialHistory, settings=settings(
        max_examples=20, stateful_step_count=30, deadline=None))
