"""Both tollgate ledgers for the tests: one event loop, and ledgers of either kind.

* ``run`` drives a coroutine on the session's one event loop. A
  ``PostgresLedger``'s connections belong to the loop that opened them, so
  the tests never use ``asyncio.run`` (a new loop per call) on a ledger.
* ``ledger_factory`` makes ledgers of the kind a parametrised fixture names:
  ``MemoryLedger``, or ``PostgresLedger`` on a fresh schema ``lab_test_<n>``
  of the session's throwaway cluster, dropped when the test ends.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from stores.tollgate.domain import GrantPolicy
from stores.tollgate.memory import MemoryLedger
from stores.tollgate.postgres import PostgresLedger

T = TypeVar("T")

LEDGER_KINDS = ("memory", "postgres")

_RUNNER = asyncio.Runner()
atexit.register(_RUNNER.close)
_SCHEMAS = itertools.count(1)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``coro``'s result, on the one loop every ledger of the session uses."""
    return _RUNNER.run(coro)


def fresh_schema() -> str:
    """A schema name no other ledger of this session has used."""
    return f"lab_test_{next(_SCHEMAS)}"


def open_postgres(dsn: str, policy: GrantPolicy | None = None,
                  schema: str | None = None) -> PostgresLedger:
    return run(PostgresLedger.open(dsn, schema or fresh_schema(), policy))


class LedgerFactory:
    """Builds ledgers of one kind for one test (``factory(policy)``), and drops
    every PostgreSQL schema it made when disposed."""

    def __init__(self, kind: str, dsn: str | None = None) -> None:
        self.kind = kind
        self.dsn = dsn
        self._opened: list[PostgresLedger] = []

    def __call__(self, policy: GrantPolicy | None = None) -> Any:
        if self.kind == "memory":
            return MemoryLedger(policy)
        assert self.dsn is not None
        ledger = open_postgres(self.dsn, policy)
        self._opened.append(ledger)
        return ledger

    def dispose(self) -> None:
        for ledger in self._opened:
            run(ledger.drop())


@contextmanager
def ledger_factory(request: pytest.FixtureRequest) -> Iterator[LedgerFactory]:
    """The factory for the kind ``request.param`` names; a postgres kind uses
    (and so waits for, or skips without) the session's ``postgres_server``."""
    dsn = request.getfixturevalue("postgres_server").dsn if request.param == "postgres" else None
    factory = LedgerFactory(request.param, dsn)
    try:
        yield factory
    finally:
        factory.dispose()
