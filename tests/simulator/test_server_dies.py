"""A server that dies, hangs or refuses mid-run ends the run in one line
(issue 25): Redis killed, restarted empty or asleep (``DEBUG SLEEP``), the
run's connections to it killed; PostgreSQL stopped fast or immediately, or
the run's connections terminated. Exit 2, no traceback, the
line naming the server, when the run stopped and that nothing was written,
and what the failed cleanup left behind. Each test starts its own server (it
is killed) and waits until the run is under way on it (its keys or its schema
exist), never for a wall-clock time: the run is ten virtual minutes long."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest
import redis
from postgres_server import serve_postgres
from redis_server import ThrowawayRedis, redis_binary, redis_required

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "data" / "scenarios"
UNDER_WAY_WITHIN_S = 120


def start_run(scenario: str, backend: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "simulator", "run", str(SCENARIOS / scenario), "--backend",
         backend, "--out", str(out), "--quiet", "--set", "duration=600s"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(under_way, run: subprocess.Popen) -> None:
    deadline = time.monotonic() + UNDER_WAY_WITHIN_S
    while not under_way():
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the run never got under way"
        time.sleep(0.1)


def until_ended(run: subprocess.Popen, strike) -> None:
    """``strike`` the run's server every tenth of a second until the run ends
    (bounded: a run that outlives every strike fails its end's assertion)."""
    deadline = time.monotonic() + UNDER_WAY_WITHIN_S
    while run.poll() is None and time.monotonic() < deadline:
        strike()
        time.sleep(0.1)


def assert_one_line_end(run: subprocess.Popen, out: Path, server: str,
                        or_opening: bool = False) -> str:
    """The run's one line. ``or_opening``: the server may also have gone while
    the run was still opening its service there, which says so instead."""
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 2, stderr
    assert "Traceback" not in stderr, stderr
    (line,) = stderr.strip().splitlines()
    if or_opening and not line.endswith(" and is incomplete: nothing was written"):
        assert line.startswith("error: ") and server in line  # gone before the run began
        return line
    assert line.startswith(f"error: the lab lost its {server} backend: ")
    assert " and is incomplete: nothing was written" in line and "(seed 1)" in line
    assert not (out / "summary.json").exists()
    return line


@pytest.fixture
def own_redis():
    binary = redis_binary()
    if binary is None:
        message = "no redis-server on PATH: real-Redis tests skipped (install redis-server)"
        if redis_required():
            pytest.fail(f"REQUIRE_REDIS=1 but {message}")
        pytest.skip(message)
    server = ThrowawayRedis(binary)
    yield server
    server.stop()


def test_redis_killed_mid_run_ends_it_in_one_line(own_redis, tmp_path):
    out = tmp_path / "out"
    run = start_run("demo.toml", own_redis.url, out)
    client = redis.Redis.from_url(own_redis.url)
    wait_until(lambda: client.dbsize() > 100, run)
    own_redis.process.kill()
    line = assert_one_line_end(run, out, own_redis.url)
    assert "the cleanup failed too" in line and "stay on" in line


def test_redis_restarted_mid_run_ends_it_in_one_line(own_redis, tmp_path):
    out = tmp_path / "out"
    run = start_run("demo.toml", own_redis.url, out)
    client = redis.Redis.from_url(own_redis.url)
    wait_until(lambda: client.dbsize() > 100, run)
    own_redis.restart()  # empty: the run's keys and library are gone
    assert_one_line_end(run, out, own_redis.url)


def test_redis_asleep_mid_run_ends_it_in_one_line_and_cleans_up(own_redis, tmp_path):
    out = tmp_path / "out"
    run = start_run("demo.toml", own_redis.url, out)
    client = redis.Redis.from_url(own_redis.url)
    wait_until(lambda: client.dbsize() > 100, run)
    # Longer than the lab's socket timeout (30 s); the server wakes in time
    # for the cleanup. Sent raw: a client would time out and re-send it.
    with socket.create_connection(("127.0.0.1", own_redis.port)) as connection:
        connection.sendall(b"DEBUG SLEEP 40\r\n")
    line = assert_one_line_end(run, out, own_redis.url)
    assert "Timeout" in line
    assert client.dbsize() == 0
    assert not client.function_list()


def test_redis_dropping_the_run_s_connections_ends_it_in_one_line(own_redis, tmp_path):
    out = tmp_path / "out"
    run = start_run("demo.toml", own_redis.url, out)
    client = redis.Redis.from_url(own_redis.url)
    wait_until(lambda: client.dbsize() > 100, run)
    # A connection dropped between calls is replaced, and the run goes on:
    # drop them until one goes mid-call (the run never idles long).
    until_ended(run, lambda: client.client_kill_filter(_type="normal", skipme=True))
    line = assert_one_line_end(run, out, own_redis.url)
    assert own_redis.url in line


@pytest.fixture
def own_postgres():
    yield from serve_postgres()


def run_schemas(dsn: str) -> int:
    """How many runs' schemas the database holds."""
    return asyncio.run(_sql(dsn, "SELECT count(*) FROM information_schema.schemata "
                                 "WHERE schema_name LIKE 'lab_run_%'"))


async def _sql(dsn: str, query: str) -> object:
    connection = await asyncpg.connect(dsn)
    try:
        return await connection.fetchval(query)
    finally:
        await connection.close()


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_stopped_mid_run_ends_it_in_one_line(own_postgres, tmp_path, mode):
    out = tmp_path / "out"
    run = start_run("tollgate.toml", own_postgres.dsn, out)
    wait_until(lambda: run_schemas(own_postgres.dsn) > 0, run)
    subprocess.run(own_postgres._command(own_postgres.binaries.pg_ctl, "stop", "-D",
                                         str(own_postgres.data), "-m", mode),
                   capture_output=True, check=False)
    assert_one_line_end(run, out, own_postgres.dsn, or_opening=True)


def test_postgresql_terminating_the_run_s_connections_ends_it_in_one_line(own_postgres, tmp_path):
    out = tmp_path / "out"
    run = start_run("tollgate.toml", own_postgres.dsn, out)
    wait_until(lambda: run_schemas(own_postgres.dsn) > 0, run)
    # The pool replaces a connection terminated between transactions, and
    # the run goes on: terminate them until one goes mid-transaction.
    until_ended(run, lambda: asyncio.run(_sql(
        own_postgres.dsn, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                          "WHERE application_name LIKE 'limiter-lab %'")))
    line = assert_one_line_end(run, out, own_postgres.dsn, or_opening=True)
    # asyncpg's "cannot switch to state 15" is said in words.
    assert "state 15" not in line or "closed the run's connection" in line, line
