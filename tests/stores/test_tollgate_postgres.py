"""What only the PostgreSQL ledger has: its own schema, storage failures,
concurrent callers, and the throwaway cluster it is tested on.

(Its answers to every trait call are the contract suite's and the
differential test's business.)
"""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import postgres_server as server_rule
import pytest
from tollgate_ledgers import fresh_schema, open_postgres, run

from simulator.backends import local_postgres
from simulator.backends.local_postgres import ThrowawayPostgres
from simulator.backends.local_server import free_port
from stores.tollgate import errors
from stores.tollgate.domain import AccountConfig, AccountStatus, LeaseState, UsageEvent
from stores.tollgate.postgres import PostgresLedger, application_name

TTL = 60_000


@pytest.fixture
def dsn(postgres_server) -> str:
    return postgres_server.dsn


@pytest.fixture
def ledger(dsn):
    ledger = open_postgres(dsn)
    yield ledger
    run(ledger.drop())


async def _admin(dsn: str, query: str, *args: Any) -> Any:
    """``query``'s rows on a connection of the test's own (not the ledger's);
    without ``args``, it may be several statements, and returns nothing."""
    connection = await asyncpg.connect(dsn)
    try:
        if not args and ";" in query:
            return await connection.execute(query)
        return await connection.fetch(query, *args)
    finally:
        await connection.close()


def schemas(dsn: str) -> set[str]:
    rows = run(_admin(dsn, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'lab_%'"))
    return {row["nspname"] for row in rows}


# -- its own schema ----------------------------------------------------------------


@pytest.mark.parametrize("schema", ["public", "lab_", "lab_Upper", "lab_x; DROP TABLE t",
                                    "lab_" + "x" * 41, "pg_catalog"])
def test_a_schema_outside_the_labs_names_is_refused_before_connecting(schema):
    with pytest.raises(ValueError, match="schema must match"):
        run(PostgresLedger.open("postgresql://nobody@127.0.0.1:1/postgres", schema))


def test_drop_removes_exactly_its_own_schema(dsn):
    doomed, kept = open_postgres(dsn), open_postgres(dsn)
    bystander = fresh_schema()
    run(_admin(dsn, f"CREATE SCHEMA {bystander}; CREATE TABLE {bystander}.account (n int); "
                    f"INSERT INTO {bystander}.account VALUES (7)"))
    try:
        run(kept.create_account(AccountConfig(1, 5)))
        run(doomed.create_account(AccountConfig(1, 9)))
        run(doomed.drop())
        assert doomed.schema not in schemas(dsn)
        assert {kept.schema, bystander} <= schemas(dsn)
        assert run(_admin(dsn, f"SELECT n FROM {bystander}.account"))[0]["n"] == 7
        assert run(kept.account_view(1)).conservation.deposited == 5
    finally:
        run(kept.drop())
        run(_admin(dsn, f"DROP SCHEMA {bystander} CASCADE"))


def test_a_ledger_reopens_its_own_schema_and_refuses_a_strangers(dsn, ledger):
    run(ledger.create_account(AccountConfig(1, 5)))
    again = open_postgres(dsn, schema=ledger.schema)
    try:
        assert run(again.account_ids()) == (1,)
        assert run(again.acquire(1, 2, TTL, 0)).grant.lease_id == 1
    finally:
        run(again.close())
    stranger = fresh_schema()
    run(_admin(dsn, f"CREATE SCHEMA {stranger}; CREATE TABLE {stranger}.ledger (n int)"))
    try:
        with pytest.raises(ValueError, match="is not a"):
            open_postgres(dsn, schema=stranger)
        assert stranger in schemas(dsn), "the stranger's schema is left alone"
    finally:
        run(_admin(dsn, f"DROP SCHEMA {stranger} CASCADE"))


# -- storage failures --------------------------------------------------------------


def test_an_unreachable_server_is_a_storage_error():
    dsn = f"postgresql://nobody@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(errors.StoreError, match="cannot connect"):
        run(PostgresLedger.open(dsn, fresh_schema()))


def with_a_lease(ledger: PostgresLedger) -> Callable[[], Awaitable[Any]]:
    grant = run(ledger.acquire(1, 10, TTL, 0)).grant
    return lambda: ledger.ingest([UsageEvent("r1", grant.lease_id, 1, grant.fencing_token, 1)],
                                 0)


# Each call locks account 1 first; the storage error its family raises.
CALLS: dict[str, tuple[Callable[[PostgresLedger], Callable[[], Awaitable[Any]]], type]] = {
    "acquire": (lambda ledger: lambda: ledger.acquire(1, 5, TTL, 0), errors.AllocateStorage),
    "deposit": (lambda ledger: lambda: ledger.deposit(1, 5), errors.AllocateStorage),
    "ingest": (with_a_lease, errors.IngestUnavailable),
    "set_account_status": (lambda ledger: lambda: ledger.set_account_status(
        1, AccountStatus.SUSPENDED), errors.StoreError),
}


async def terminated_mid_transaction(dsn: str, ledger: PostgresLedger,
                                     call: Callable[[], Awaitable[Any]]) -> BaseException:
    """Run ``call`` while a connection of ours holds account 1's row, and
    terminate the ledger's backend as it waits: what does ``call`` raise?"""
    admin = await asyncpg.connect(dsn)
    try:
        async with admin.transaction():
            await admin.execute(f"SELECT 1 FROM {ledger.schema}.account WHERE account_id = 1 "
                                "FOR UPDATE")
            task = asyncio.ensure_future(call())
            for _ in range(500):
                waiting = await admin.fetchval(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 "
                    "AND wait_event_type = 'Lock'", application_name(ledger.schema))
                if waiting is not None:
                    break
                await asyncio.sleep(0.01)
            assert waiting is not None, "the ledger's call never waited on the row"
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", waiting)
            with pytest.raises(BaseException) as caught:
                await task
            return caught.value
    finally:
        await admin.close()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_connection_terminated_mid_call_is_a_storage_error_and_changes_nothing(
        dsn, ledger, name):
    run(ledger.create_account(AccountConfig(1, 100)))
    make_call, storage_error = CALLS[name]
    call = make_call(ledger)
    before = run(ledger.account_view(1)), run(ledger.lease_views())
    error = run(terminated_mid_transaction(dsn, ledger, call))
    assert type(error) is storage_error, f"{name} raised {error!r}"
    assert not isinstance(error, errors.AllocateError) or error.name == "storage"
    assert (run(ledger.account_view(1)), run(ledger.lease_views())) == before
    run(call())  # the ledger reconnects for the next call


def test_a_closed_ledger_fails_as_storage_not_as_a_refusal(dsn):
    ledger = open_postgres(dsn)
    run(ledger.create_account(AccountConfig(1, 100)))
    run(ledger.close())
    try:
        with pytest.raises(errors.AllocateStorage):
            run(ledger.acquire(1, 5, TTL, 0))
        with pytest.raises(errors.IngestUnavailable):
            run(ledger.ingest([], 0))
        with pytest.raises(errors.StoreError):
            run(ledger.account_view(1))
    finally:
        run(_admin(dsn, f"DROP SCHEMA {ledger.schema} CASCADE"))


# -- concurrent callers ------------------------------------------------------------


def test_concurrent_callers_neither_deadlock_nor_bill_twice(dsn):
    ledger = run(PostgresLedger.open(dsn, fresh_schema(), max_connections=6))

    async def contend() -> None:
        await ledger.create_account(AccountConfig(1, 10_000))
        await ledger.create_account(AccountConfig(2, 10_000))
        grants = [a.grant for a in await asyncio.gather(
            *(ledger.acquire(1 + n % 2, 10, TTL, 0) for n in range(24)))]
        assert sorted(g.lease_id for g in grants) == list(range(1, 25)), "dense, never reused"
        # One request id replayed by every batch, on leases of both accounts:
        # the batches lock different accounts, so only the request id's key
        # stands between them and billing it twice.
        replays = [UsageEvent("same", g.lease_id, g.account_id, g.fencing_token, 1)
                   for g in grants[:2]]
        reports = await asyncio.gather(*(ledger.ingest(
            [replays[n % 2], UsageEvent(f"own{n}", g.lease_id, g.account_id, g.fencing_token, 2)],
            0) for n, g in enumerate(grants)))
        assert sum(report.accepted for report in reports) == len(grants) + 1
        await asyncio.gather(*(ledger.release(g.lease_id, g.fencing_token, 7, 0)
                               for g in grants[::2]),
                             *(ledger.consolidate(g.lease_id, g.fencing_token, 7, 5, 0, TTL, 0)
                               for g in grants[1::2]),
                             ledger.reclaim_expired_batch(TTL, 3))  # nothing due yet
        views = await ledger.lease_views()
        assert [v.state for v in views].count(LeaseState.ACTIVE) == len(grants[1::2])
        settled = 0
        for account in (1, 2):
            conservation = await ledger.conservation(account)
            assert conservation.holds(), conservation
            settled += conservation.settled_usage
        assert settled == 2 * len(grants) + 1, "each lease's own usage, and the replay once"

    try:
        run(contend())
    finally:
        run(ledger.drop())


# -- the throwaway cluster ---------------------------------------------------------


def test_the_throwaway_cluster_listens_on_loopback_as_an_unprivileged_superuser(
        postgres_server):
    assert postgres_server.dsn == (f"postgresql://{postgres_server.user}@127.0.0.1:"
                                   f"{postgres_server.port}/postgres")
    owner = pwd.getpwuid(postgres_server.data.stat().st_uid).pw_name
    assert owner == postgres_server.user
    if os.geteuid() == 0:
        assert owner != "root", "PostgreSQL refuses to run as root"
    assert run(_admin(postgres_server.dsn, "SHOW listen_addresses"))[0][0] == "127.0.0.1"


def test_the_binaries_come_from_path_else_from_the_highest_complete_debian_version(
        tmp_path, monkeypatch):
    for version, programs in {"9.6": ("initdb", "postgres", "pg_ctl"),
                              "15": ("initdb", "postgres", "pg_ctl"),
                              "16": ("initdb", "postgres")}.items():
        (tmp_path / version / "bin").mkdir(parents=True)
        for program in programs:
            (tmp_path / version / "bin" / program).touch(mode=0o755)
    monkeypatch.setattr(local_postgres, "DEBIAN_ROOT", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    found = local_postgres.postgres_binaries()
    assert found is not None and found.pg_ctl == str(tmp_path / "15" / "bin" / "pg_ctl")
    monkeypatch.setenv("PATH", str(tmp_path / "9.6" / "bin"))
    assert local_postgres.postgres_binaries().initdb == str(tmp_path / "9.6" / "bin" / "initdb")
    monkeypatch.setattr(local_postgres, "DEBIAN_ROOT", tmp_path / "absent")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert local_postgres.postgres_binaries() is None


def test_without_the_binaries_tests_skip_naming_them_and_fail_when_required(monkeypatch):
    monkeypatch.setattr(server_rule, "postgres_binaries", lambda: None)
    monkeypatch.delenv("REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="initdb/postgres/pg_ctl"):
        next(server_rule.serve_postgres())
    monkeypatch.setenv("REQUIRE_POSTGRES", "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_POSTGRES=1 but no initdb"):
        next(server_rule.serve_postgres())


def test_a_stopped_cluster_leaves_no_directory_behind():
    server = ThrowawayPostgres()
    directory = Path(server.directory)
    assert (directory / "data" / "PG_VERSION").exists()
    server.stop()
    assert not directory.exists()
    server.stop()
