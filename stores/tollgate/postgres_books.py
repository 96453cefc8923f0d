"""One PostgreSQL transaction's ``Books``: the rows it locked, as records, and
what the call changed in them, written back.

``PostgresLedger`` runs every call as: lock and load the rows the call can
touch into a ``Books``; run the call through a ``MemoryLedger`` over that
``Books`` (the one statement of the rules); write back every record that
changed, every new lease and account, the new request ids and the lease
counter; commit. What must be loaded for ``MemoryLedger`` to answer as it
would over the whole ledger:

* each account the call names, with **all** its active leases (the funding
  evidence sums them; settling one removes it from ``active``);
* each lease the call names, settled ones included (late usage, a release's
  ``LeaseNotActive``), after its account;
* the lease counter, when the call may grant;
* the request ids of an ingest batch already billed.

Locks follow one order so concurrent callers cannot deadlock: accounts
ascending, then leases ascending, then the counter row, then new request ids
ascending. Every write to a lease happens under its account's lock, so the
account row is the real per-account mutex and a load of an account's active
leases under it is consistent. A read-only call loads the same rows without
locks in one snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from stores.tollgate.domain import (
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    AccountStatus,
    BudgetSchedule,
    CapacityClass,
    GrantPolicy,
    LeaseGrant,
    LeaseState,
)
from stores.tollgate.memory import AccountRecord, Books, LeaseRecord, MemoryLedger

ACCOUNT_COLUMNS = ("account_id", "status", "capacity_class", "balance", "deposited",
                   "schedule_allowance", "schedule_period_ms", "schedule_anchor_ms",
                   "period_start", "allowance", "overage_recorded", "settled_usage",
                   "settlement_loss", "expired", "next_token")
LEASE_GRANT_COLUMNS = ("lease_id", "account_id", "fencing_token", "granted", "expires_at")
LEASE_STATE_COLUMNS = ("live_allowance", "closed_allowance", "usage", "state", "loss")
"""A lease's grant never changes once written; only its state columns do."""
LEASE_COLUMNS = LEASE_GRANT_COLUMNS + LEASE_STATE_COLUMNS

_ACTIVE = LeaseState.ACTIVE.value


def storable_ids(values: Iterable[object]) -> list[int]:
    """The distinct ids among ``values`` a ``BIGINT`` column can hold,
    ascending. An id outside that range names no row, so the call sees it as
    unknown, as ``MemoryLedger`` does; it never reaches the driver."""
    return sorted({int(value) for value in values
                   if isinstance(value, int) and TIMESTAMP_MIN <= value <= TIMESTAMP_MAX})


def request_key(request_id: str) -> bytes:
    """A request id as stored: UTF-8, lone surrogates kept, so any ``str`` round-trips."""
    return request_id.encode("utf-8", "surrogatepass")


def _request_id(key: bytes) -> str:
    return bytes(key).decode("utf-8", "surrogatepass")


def account_row(record: AccountRecord) -> tuple[Any, ...]:
    schedule = record.schedule
    return (record.account_id, record.status.value, record.capacity_class.value,
            record.balance, record.deposited,
            None if schedule is None else schedule.allowance,
            None if schedule is None else schedule.period_ms,
            None if schedule is None else schedule.anchor_ms,
            record.period_start, record.allowance, record.overage_recorded,
            record.settled_usage, record.settlement_loss, record.expired, record.next_token)


def _account_record(row: asyncpg.Record) -> AccountRecord:
    schedule = None
    if row["schedule_period_ms"] is not None:
        schedule = BudgetSchedule(row["schedule_allowance"], row["schedule_period_ms"],
                                  row["schedule_anchor_ms"])
    return AccountRecord(
        account_id=row["account_id"], status=AccountStatus(row["status"]),
        capacity_class=CapacityClass(row["capacity_class"]), balance=row["balance"],
        deposited=row["deposited"], schedule=schedule, period_start=row["period_start"],
        allowance=row["allowance"], overage_recorded=row["overage_recorded"],
        settled_usage=row["settled_usage"], settlement_loss=row["settlement_loss"],
        expired=row["expired"], next_token=row["next_token"])


def lease_row(record: LeaseRecord) -> tuple[Any, ...]:
    grant = record.grant
    return (grant.lease_id, grant.account_id, grant.fencing_token, grant.granted,
            grant.expires_at, record.live_allowance, record.closed_allowance, record.usage,
            record.state.value, record.loss)


def lease_record(row: asyncpg.Record) -> LeaseRecord:
    grant = LeaseGrant(*(row[column] for column in LEASE_GRANT_COLUMNS))
    return LeaseRecord(grant, live_allowance=row["live_allowance"],
                       closed_allowance=row["closed_allowance"], usage=row["usage"],
                       state=LeaseState(row["state"]), loss=row["loss"])


def _insert(table: str, columns: tuple[str, ...]) -> str:
    marks = ", ".join(f"${n}" for n in range(1, len(columns) + 1))
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"


def _update(table: str, key: str, columns: tuple[str, ...]) -> str:
    assignments = ", ".join(f"{column} = ${n}" for n, column in enumerate(columns, start=2))
    return f"UPDATE {table} SET {assignments} WHERE {key} = $1"


_SELECT_ACCOUNTS = f"SELECT {', '.join(ACCOUNT_COLUMNS)} FROM account"
_SELECT_LEASES = f"SELECT {', '.join(LEASE_COLUMNS)} FROM lease"
_INSERT_ACCOUNT = _insert("account", ACCOUNT_COLUMNS)
_UPDATE_ACCOUNT = _update("account", "account_id", ACCOUNT_COLUMNS[1:])
_INSERT_LEASE = _insert("lease", LEASE_COLUMNS)
_UPDATE_LEASE = _update("lease", "lease_id", LEASE_STATE_COLUMNS)


@dataclass
class TransactionBooks:
    """The ``Books`` of one transaction on ``connection``, and how to persist them.

    Load with the ``lock_*``/``load_*`` methods (in the lock order above), take
    the ledger with ``ledger()`` -- which remembers the rows as loaded -- run
    the call on it, then ``write_back()``. ``locking=False`` is for a read-only
    snapshot: the same loads without ``FOR UPDATE``."""

    connection: asyncpg.Connection
    locking: bool = True
    rules: type[MemoryLedger] = MemoryLedger
    """The rules a call runs (``MemoryLedger``, or a variant's subclass of it)."""
    books: Books = field(default_factory=Books)
    _accounts_before: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    _leases_before: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    _requests_before: frozenset[str] = frozenset()
    _lease_counter_before: int = 1

    @property
    def _for_update(self) -> str:
        return " FOR UPDATE" if self.locking else ""

    def _keep_lease(self, record: LeaseRecord) -> None:
        lease_id = record.grant.lease_id
        if lease_id in self.books.leases:
            return
        self.books.leases[lease_id] = record
        account = self.books.accounts.get(record.grant.account_id)
        if record.state is LeaseState.ACTIVE and account is not None:
            account.active[lease_id] = record

    async def accounts_of(self, lease_ids: Iterable[object]) -> list[int]:
        """The accounts owning ``lease_ids`` (unlocked: a lease never changes
        account), so they can be locked before the leases."""
        ids = storable_ids(lease_ids)
        if not ids:
            return []
        rows = await self.connection.fetch(
            "SELECT DISTINCT account_id FROM lease WHERE lease_id = ANY($1::bigint[])", ids)
        return [row["account_id"] for row in rows]

    async def lock_accounts(self, account_ids: Iterable[object]) -> None:
        """Load (and lock) the accounts, ascending, each with all its active leases."""
        ids = [i for i in storable_ids(account_ids) if i not in self.books.accounts]
        if not ids:
            return
        rows = await self.connection.fetch(
            f"{_SELECT_ACCOUNTS} WHERE account_id = ANY($1::bigint[]) ORDER BY account_id"
            f"{self._for_update}", ids)
        for row in rows:
            self.books.accounts[row["account_id"]] = _account_record(row)
        await self._load_leases(
            f"{_SELECT_LEASES} WHERE account_id = ANY($1::bigint[]) AND state = '{_ACTIVE}' "
            f"ORDER BY lease_id{self._for_update}", [row["account_id"] for row in rows])

    async def lock_scheduled_accounts(self) -> None:
        """Every account with a schedule, as ``lock_accounts`` loads them."""
        rows = await self.connection.fetch(
            "SELECT account_id FROM account WHERE schedule_period_ms IS NOT NULL")
        await self.lock_accounts(row["account_id"] for row in rows)

    async def lock_leases(self, lease_ids: Iterable[object]) -> None:
        """Load (and lock) the named leases, ascending; lock their accounts first."""
        ids = [i for i in storable_ids(lease_ids) if i not in self.books.leases]
        if ids:
            await self._load_leases(f"{_SELECT_LEASES} WHERE lease_id = ANY($1::bigint[]) "
                                    f"ORDER BY lease_id{self._for_update}", ids)

    async def load_all_leases(self) -> None:
        await self._load_leases(f"{_SELECT_LEASES} ORDER BY lease_id{self._for_update}")

    async def _load_leases(self, query: str, *args: object) -> None:
        for row in await self.connection.fetch(query, *args):
            self._keep_lease(lease_record(row))

    async def lock_lease_counter(self) -> None:
        self.books.next_lease_id = await self.connection.fetchval(
            f"SELECT next_lease_id FROM ledger{self._for_update}")

    async def load_requests(self, request_ids: Iterable[str]) -> None:
        """The ids among ``request_ids`` already billed. Unlocked: a concurrent
        transaction billing one of the others makes this one's insert wait,
        then fail as a unique violation, and the call is run again."""
        keys = sorted({request_key(request_id) for request_id in request_ids})
        rows = await self.connection.fetch(
            "SELECT request_id FROM request WHERE request_id = ANY($1::bytea[])", keys)
        self.books.requests.update(_request_id(row["request_id"]) for row in rows)

    def ledger(self, policy: GrantPolicy) -> MemoryLedger:
        """The rules over these books, remembering them as loaded."""
        self._accounts_before = {i: account_row(r) for i, r in self.books.accounts.items()}
        self._leases_before = {i: lease_row(r) for i, r in self.books.leases.items()}
        self._requests_before = frozenset(self.books.requests)
        self._lease_counter_before = self.books.next_lease_id
        return self.rules(policy, self.books)

    async def write_back(self) -> None:
        """Persist what the call changed: accounts, then leases, then request
        ids (ascending), then the lease counter."""
        books, connection = self.books, self.connection
        new_accounts, changed_accounts = self._changes(
            self._accounts_before, {i: account_row(r) for i, r in books.accounts.items()})
        if new_accounts:
            await connection.executemany(_INSERT_ACCOUNT, new_accounts)
        if changed_accounts:
            await connection.executemany(_UPDATE_ACCOUNT, changed_accounts)
        new_leases, changed_leases = self._changes(
            self._leases_before, {i: lease_row(r) for i, r in books.leases.items()})
        if new_leases:
            await connection.executemany(_INSERT_LEASE, new_leases)
        if changed_leases:
            await connection.executemany(
                _UPDATE_LEASE, [(row[0], *row[len(LEASE_GRANT_COLUMNS):])
                                for row in changed_leases])
        billed = sorted(request_key(i) for i in books.requests - self._requests_before)
        if billed:
            await connection.execute(
                "INSERT INTO request (request_id) SELECT unnest($1::bytea[])", billed)
        if books.next_lease_id != self._lease_counter_before:
            await connection.execute("UPDATE ledger SET next_lease_id = $1",
                                     books.next_lease_id)

    @staticmethod
    def _changes(before: dict[int, tuple[Any, ...]], after: dict[int, tuple[Any, ...]]
                 ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Rows new since loading, and rows changed, each ascending by id."""
        new = [after[i] for i in sorted(after) if i not in before]
        changed = [after[i] for i in sorted(after) if i in before and after[i] != before[i]]
        return new, changed
