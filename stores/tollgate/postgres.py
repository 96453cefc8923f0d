"""``PostgresLedger``: tollgate's ledger on a real PostgreSQL (seed 003's PostgresStore).

The same traits as ``MemoryLedger`` -- ``LeaseAllocator``, ``UsageSink``,
``AdminStore`` and ``LedgerInspection`` -- with the same answers for every
sequence of calls: same grants, lease ids and fencing tokens, same refusals
and evidence, same books. That sameness is built in, not imitated: each call
is one database transaction that locks and loads the rows the call can touch,
runs the call through a ``MemoryLedger`` over just those rows, and writes back
what changed (``postgres_books`` says which rows and in what lock order). The
tables and their CHECK constraints are in ``postgres_schema``.

Failures: anything the database or the driver raises -- a lost connection, a
closed pool, a timeout, an error not meant as a refusal -- surfaces as the
seed's storage error of the call's family (``AllocateStorage`` from the
allocator and ``deposit``, ``IngestUnavailable`` from ingest, ``StoreError``
from the rest), never as a domain refusal, and a refusal never as a storage
error. A deadlock, a serialization failure or a request id billed by a
concurrent transaction rolls the call back and runs it again, a few times.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import asyncpg

from stores.tollgate.domain import (
    TIMESTAMP_MAX,
    AccountConfig,
    AccountStatus,
    AccountView,
    Allocation,
    BudgetSchedule,
    CapacityClass,
    Conservation,
    GrantPolicy,
    IngestReport,
    Inspection,
    LeaseState,
    LeaseView,
    ReclaimBatch,
    RolloverBatch,
    StatusChange,
    UsageEvent,
    require_limit,
)
from stores.tollgate.errors import AllocateStorage, IngestUnavailable, StoreError
from stores.tollgate.memory import MemoryLedger
from stores.tollgate.ports import AdminStore, LeaseAllocator, LedgerInspection, UsageSink
from stores.tollgate.postgres_books import TransactionBooks
from stores.tollgate.postgres_schema import LAYOUT, TABLES, require_schema_name

T = TypeVar("T")

ATTEMPTS = 5
"""Runs of one call that lost to a concurrent transaction before giving up."""

_CONFLICTS = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError,
              asyncpg.UniqueViolationError)
"""Errors that mean "a concurrent transaction won": run the call again."""

_STORAGE_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError,
                     asyncpg.exceptions.InternalClientError, OSError, TimeoutError)
"""Errors of the database or the driver: the call's outcome may be unknown."""


def application_name(schema: str) -> str:
    """How the ledger's connections name themselves to the server
    (``pg_stat_activity``), so an operator can tell whose they are."""
    return f"limiter-lab {schema}"


def _as_is(error: StoreError) -> Exception:
    return error


def _ingest_failure(error: StoreError) -> Exception:
    return IngestUnavailable(str(error))


Work = Callable[[TransactionBooks], Awaitable[T]]


class PostgresLedger(LeaseAllocator, UsageSink, AdminStore, LedgerInspection):
    """The ledger in one schema of a PostgreSQL database. Build it with ``open``."""

    rules: type[MemoryLedger] = MemoryLedger
    """The rules each transaction runs over the books it loaded; a variant's
    ledger sets its subclass of ``MemoryLedger`` here, so it runs on both."""

    def __init__(self, pool: asyncpg.Pool, schema: str, policy: GrantPolicy) -> None:
        self._pool = pool
        self.schema = schema
        self.policy = policy

    @classmethod
    async def open(cls, dsn: str, schema: str, policy: GrantPolicy | None = None, *,
                   max_connections: int = 4,
                   command_timeout_s: float | None = 30.0) -> PostgresLedger:
        """Connect to ``dsn`` and work in ``schema`` (``lab_...``), creating it
        and its tables if absent; an existing schema must be a tollgate ledger
        of this layout. ``ValueError`` for a bad schema name, ``GrantPolicyError``
        for a bad policy, ``StoreError`` when the server cannot be used."""
        require_schema_name(schema)
        policy = policy or GrantPolicy()
        policy.validate()
        try:
            pool = await asyncpg.create_pool(
                dsn, min_size=1, max_size=max_connections, command_timeout=command_timeout_s,
                server_settings={"search_path": schema,
                                 "application_name": application_name(schema)})
        except (*_STORAGE_FAILURES, ValueError) as error:
            raise StoreError(f"cannot connect to PostgreSQL: {error}") from error
        ledger = cls(pool, schema, policy)
        try:
            await ledger._create_or_check_schema()
        except BaseException:
            pool.terminate()
            raise
        return ledger

    async def _create_or_check_schema(self) -> None:
        async def work(connection: asyncpg.Connection) -> None:
            exists = await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", self.schema)
            if not exists:
                await connection.execute(f"CREATE SCHEMA {self.schema}")
                await connection.execute(TABLES)
                return
            marked = await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE "
                "table_schema = $1 AND table_name = 'ledger' AND column_name = 'layout')",
                self.schema)
            layout = marked and await connection.fetchval("SELECT layout FROM ledger")
            if layout != LAYOUT:
                raise ValueError(f"schema {self.schema} exists and is not a {LAYOUT} ledger")
        await self._with_connection(work, _as_is)

    async def close(self) -> None:
        """Close the connections; the schema stays. Later calls fail as storage errors."""
        try:
            await self._pool.close()
        except _STORAGE_FAILURES:
            self._pool.terminate()

    async def drop(self) -> None:
        """Drop this ledger's schema, and nothing else, then close."""
        async def work(connection: asyncpg.Connection) -> None:
            await connection.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        try:
            await self._with_connection(work, _as_is)
        finally:
            await self.close()

    # -- transactions ----------------------------------------------------------

    async def _with_connection(self, work: Callable[[asyncpg.Connection], Awaitable[T]],
                               storage: Callable[[StoreError], Exception], *,
                               readonly: bool = False) -> T:
        """``work`` in one transaction, run again after losing to a concurrent
        one; a failure of the database or driver raised as ``storage`` makes it."""
        isolation = "repeatable_read" if readonly else "read_committed"
        conflict: Exception | None = None
        for _ in range(ATTEMPTS):
            try:
                async with self._pool.acquire() as connection, connection.transaction(
                        isolation=isolation, readonly=readonly):
                    return await work(connection)
            except _CONFLICTS as error:
                conflict = error
            except _STORAGE_FAILURES as error:
                raise storage(StoreError(f"PostgreSQL ledger {self.schema}: "
                                         f"{type(error).__name__}: {error}")) from error
        raise storage(StoreError(f"PostgreSQL ledger {self.schema}: still conflicting after "
                                 f"{ATTEMPTS} attempts: {conflict}")) from conflict

    async def _write(self, work: Work[T], storage: Callable[[StoreError], Exception]) -> T:
        """One call: ``work`` loads and runs it on ``TransactionBooks``, then
        what it changed is written back, in the same transaction."""
        async def transaction(connection: asyncpg.Connection) -> T:
            books = TransactionBooks(connection, rules=self.rules)
            result = await work(books)
            await books.write_back()
            return result
        return await self._with_connection(transaction, storage)

    async def _read(self, work: Work[T]) -> T:
        """One consistent snapshot, no locks, nothing written."""
        async def transaction(connection: asyncpg.Connection) -> T:
            return await work(TransactionBooks(connection, locking=False, rules=self.rules))
        return await self._with_connection(transaction, _as_is, readonly=True)

    # -- allocator -------------------------------------------------------------

    async def acquire(self, account: int, requested: int, ttl_ms: int,
                      now: int) -> Allocation:
        async def work(books: TransactionBooks) -> Allocation:
            await books.lock_accounts([account])
            await books.lock_lease_counter()
            return await books.ledger(self.policy).acquire(account, requested, ttl_ms, now)
        return await self._write(work, AllocateStorage)

    async def _lock_lease(self, books: TransactionBooks, lease_id: int) -> None:
        await books.lock_accounts(await books.accounts_of([lease_id]))
        await books.lock_leases([lease_id])

    async def release(self, lease_id: int, fencing_token: int, unspent: int,
                      now: int) -> None:
        async def work(books: TransactionBooks) -> None:
            await self._lock_lease(books, lease_id)
            await books.ledger(self.policy).release(lease_id, fencing_token, unspent, now)
        await self._write(work, AllocateStorage)

    async def consolidate(self, lease_id: int, fencing_token: int, unspent: int,
                          requested: int, needed: int, ttl_ms: int, now: int) -> Allocation:
        async def work(books: TransactionBooks) -> Allocation:
            await self._lock_lease(books, lease_id)
            await books.lock_lease_counter()
            return await books.ledger(self.policy).consolidate(
                lease_id, fencing_token, unspent, requested, needed, ttl_ms, now)
        return await self._write(work, AllocateStorage)

    async def reclaim_expired_batch(self, now: int, limit: int) -> ReclaimBatch:
        async def work(books: TransactionBooks) -> ReclaimBatch:
            require_limit(limit)
            cutoff = self.policy.reclaim_cutoff(now)
            if cutoff is not None:
                # The first ``limit`` due leases in the sweep's order; locking
                # their accounts loads them (and maybe later due ones). Every
                # stored expiry and count is a BIGINT, so clamping the two
                # bounds to it selects the same leases and never overflows.
                due = await books.connection.fetch(
                    "SELECT account_id FROM lease WHERE state = $1 AND expires_at <= $2 "
                    "ORDER BY expires_at, lease_id LIMIT $3", LeaseState.ACTIVE.value,
                    min(cutoff, TIMESTAMP_MAX), min(limit, TIMESTAMP_MAX))
                await books.lock_accounts(row["account_id"] for row in due)
            return await books.ledger(self.policy).reclaim_expired_batch(now, limit)
        return await self._write(work, _as_is)

    # -- usage -----------------------------------------------------------------

    async def ingest(self, events: Sequence[UsageEvent], now: int) -> IngestReport:
        async def work(books: TransactionBooks) -> IngestReport:
            lease_ids = [event.lease_id for event in events]
            await books.lock_accounts(await books.accounts_of(lease_ids))
            await books.lock_leases(lease_ids)
            await books.load_requests(event.request_id for event in events)
            return await books.ledger(self.policy).ingest(events, now)
        return await self._write(work, _ingest_failure)

    # -- admin -----------------------------------------------------------------

    async def _on_account(self, account: int, call: Callable[[MemoryLedger], Awaitable[T]],
                          storage: Callable[[StoreError], Exception] = _as_is) -> T:
        """An admin call touching one account (and its active leases)."""
        async def work(books: TransactionBooks) -> T:
            await books.lock_accounts([account])
            return await call(books.ledger(self.policy))
        return await self._write(work, storage)

    async def create_account(self, config: AccountConfig) -> None:
        # A concurrent creation of the same id fails this one's insert as a
        # unique violation; run again, it sees the account and refuses.
        await self._on_account(config.account_id,
                               lambda ledger: ledger.create_account(config))

    async def deposit(self, account: int, units: int) -> None:
        await self._on_account(account, lambda ledger: ledger.deposit(account, units),
                               AllocateStorage)

    async def set_account_status(self, account: int, status: AccountStatus) -> StatusChange:
        return await self._on_account(account,
                                      lambda ledger: ledger.set_account_status(account, status))

    async def set_capacity_class(self, account: int,
                                 capacity_class: CapacityClass) -> StatusChange:
        return await self._on_account(
            account, lambda ledger: ledger.set_capacity_class(account, capacity_class))

    async def set_budget_schedule(self, account: int,
                                  schedule: BudgetSchedule | None) -> None:
        await self._on_account(account,
                               lambda ledger: ledger.set_budget_schedule(account, schedule))

    async def roll_due_periods(self, now: int, limit: int) -> RolloverBatch:
        async def work(books: TransactionBooks) -> RolloverBatch:
            await books.lock_scheduled_accounts()
            return await books.ledger(self.policy).roll_due_periods(now, limit)
        return await self._write(work, _as_is)

    # -- the calls a variant's rules add (``variants.RollsWhatItRead``) --------

    async def due_periods(self, now: int, limit: int) -> tuple[int, ...]:
        """The accounts past a boundary, read in one snapshot without locks:
        the first half of the historical rollover, answered by rules that
        have it (the fixed ``MemoryLedger`` has not)."""
        async def work(books: TransactionBooks) -> tuple[int, ...]:
            await books.lock_scheduled_accounts()
            return await books.ledger(self.policy).due_periods(now, limit)
        return await self._read(work)

    async def roll_periods(self, accounts: Sequence[int], now: int) -> RolloverBatch:
        """The second half: roll the named accounts, in one transaction under
        their locks, as rules that have it do."""
        async def work(books: TransactionBooks) -> RolloverBatch:
            await books.lock_accounts(accounts)
            return await books.ledger(self.policy).roll_periods(accounts, now)
        return await self._write(work, _as_is)

    # -- reads -----------------------------------------------------------------

    async def _account_read(self, account: int,
                            call: Callable[[MemoryLedger], Awaitable[T]]) -> T:
        async def work(books: TransactionBooks) -> T:
            await books.lock_accounts([account])
            return await call(books.ledger(self.policy))
        return await self._read(work)

    async def account_view(self, account: int) -> AccountView | None:
        return await self._account_read(account, lambda ledger: ledger.account_view(account))

    async def conservation(self, account: int) -> Conservation | None:
        return await self._account_read(account, lambda ledger: ledger.conservation(account))

    async def account_ids(self) -> tuple[int, ...]:
        async def work(books: TransactionBooks) -> tuple[int, ...]:
            rows = await books.connection.fetch("SELECT account_id FROM account "
                                                "ORDER BY account_id")
            return tuple(row["account_id"] for row in rows)
        return await self._read(work)

    async def lease_views(self) -> tuple[LeaseView, ...]:
        async def work(books: TransactionBooks) -> tuple[LeaseView, ...]:
            await books.load_all_leases()
            return await books.ledger(self.policy).lease_views()
        return await self._read(work)

    async def lease_view(self, lease_id: int) -> LeaseView | None:
        async def work(books: TransactionBooks) -> LeaseView | None:
            await books.lock_leases([lease_id])
            return await books.ledger(self.policy).lease_view(lease_id)
        return await self._read(work)

    async def inspect(self, leases: Sequence[int] = (), statements: Sequence[int] = (),
                      accounts: Sequence[int] = ()) -> Inspection:
        async def work(books: TransactionBooks) -> Inspection:
            await books.lock_accounts(sorted({*statements, *accounts}))
            await books.lock_leases(sorted(set(leases)))
            return await books.ledger(self.policy).inspect(leases, statements, accounts)
        return await self._read(work)
