"""Shared fixtures: the throwaway real Redis, both Redis backends, and the
throwaway PostgreSQL."""

from __future__ import annotations

import os
import uuid

# fakeredis picks its Lua at import; Redis runs Lua 5.1, so must it (number
# formatting differs in 5.3+).
os.environ.setdefault("FAKEREDIS_LUA_VERSION", "5.1")

import pytest
from budget_lab import Lab
from postgres_server import SKIP_REASON as POSTGRES_SKIP_REASON
from postgres_server import serve_postgres
from redis_server import ThrowawayRedis, redis_binary, redis_required

_SKIPPED_FOR_REDIS: list[str] = []
_SKIPPED_FOR_POSTGRES: list[str] = []
_SKIPPED_FOR_BROWSER: list[str] = []


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server for this session, or a loud skip (a failure when
    REQUIRE_REDIS=1)."""
    binary = redis_binary()
    if binary is None:
        message = "no redis-server on PATH: real-Redis tests skipped (install redis-server)"
        if redis_required():
            pytest.fail(f"REQUIRE_REDIS=1 but {message}")
        pytest.skip(message)
    server = ThrowawayRedis(binary)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster_installed() -> None:
    """``redis-server`` and ``redis-cli``, for a throwaway Redis Cluster, or
    a loud skip (a failure when REQUIRE_REDIS=1)."""
    from simulator.backends.local_cluster import cluster_binaries
    if cluster_binaries() is None:
        message = ("no redis-server and redis-cli on PATH: real Redis Cluster tests skipped "
                   "(install redis-server)")
        if redis_required():
            pytest.fail(f"REQUIRE_REDIS=1 but {message}")
        pytest.skip(message)


@pytest.fixture(scope="session")
def redis_cluster(redis_cluster_installed):
    """A throwaway three-primary Redis Cluster for this session."""
    from simulator.backends.local_cluster import ThrowawayCluster
    cluster = ThrowawayCluster(3)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster for this session, or a loud skip (a
    failure when REQUIRE_POSTGRES=1)."""
    yield from serve_postgres()


@pytest.fixture
def redis_url(redis_server) -> str:
    return redis_server.url


@pytest.fixture
def key_prefix() -> str:
    """A prefix no other test uses, so tests never see each other's keys."""
    return f"labtest:{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["fakeredis", "redis"])
def backend_name(request) -> str:
    """Each Redis contract test runs on fakeredis and on the real server."""
    if request.param == "redis":
        request.getfixturevalue("redis_server")
    return request.param


@pytest.fixture
def backend_url(backend_name, request) -> str:
    """The ``--backend`` value of the parametrised backend."""
    if backend_name == "fakeredis":
        return "fakeredis"
    return request.getfixturevalue("redis_url")


@pytest.fixture
def lab(backend_name, request, key_prefix) -> Lab:
    """A budget-store test's keyspace on the parametrised backend."""
    url = request.getfixturevalue("redis_url") if backend_name == "redis" else None
    return Lab(backend_name, url, key_prefix)


def pytest_runtest_logreport(report):
    if report.skipped and "redis-server" in str(report.longrepr):
        _SKIPPED_FOR_REDIS.append(report.nodeid)
    if report.skipped and POSTGRES_SKIP_REASON in str(report.longrepr):
        _SKIPPED_FOR_POSTGRES.append(report.nodeid)
    if report.skipped and "no Chromium" in str(report.longrepr):
        _SKIPPED_FOR_BROWSER.append(report.nodeid)


def _untested(terminalreporter, title: str, skipped: list[str], missing: str,
              install: str, required: str) -> None:
    if skipped:
        terminalreporter.section(title, sep="!", red=True, bold=True)
        terminalreporter.line(
            f"{len(skipped)} test(s) skipped for want of {missing}; install it ({install}) "
            f"or use `make test`, which CI runs with {required}=1.",
            red=True,
        )


def pytest_terminal_summary(terminalreporter):
    _untested(terminalreporter, "REAL REDIS NOT TESTED", _SKIPPED_FOR_REDIS, "redis-server",
              "apt-get install redis-server", "REQUIRE_REDIS")
    _untested(terminalreporter, "POSTGRESQL NOT TESTED", _SKIPPED_FOR_POSTGRES,
              "PostgreSQL's binaries", "apt-get install postgresql", "REQUIRE_POSTGRES")
    _untested(terminalreporter, "BROWSER NOT TESTED", _SKIPPED_FOR_BROWSER, "Chromium",
              "apt-get install chromium", "REQUIRE_BROWSER")
