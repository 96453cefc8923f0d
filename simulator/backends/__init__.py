"""Where a run's server executes: ``memory``, ``valkey``, ``fakeredis`` or ``redis://...``.

``memory`` runs stores whose state is in-process objects (no Redis at all);
``valkey`` is the lab's engine, the default for Redis stores: a throwaway
Valkey server of its own per run (``engine``); ``fakeredis`` runs the same
scripts in-process, a fresh server per run (the fallback where no engine
installs); ``redis://HOST:PORT/DB`` is a real server. The lab refuses a server that
is not on loopback unless explicitly allowed, and on a server it did not start
touches only keys under its own per-run prefix.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

# fakeredis picks its Lua at import; Redis runs Lua 5.1, so must it (number
# formatting differs in 5.3+).
os.environ.setdefault("FAKEREDIS_LUA_VERSION", "5.1")

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from simulator.backends import engine
from simulator.backends.engine import ENGINE
from simulator.backends.functions_library import FunctionsLibrary
from simulator.backends.redis_backend import (
    EMBEDDED_NAMESPACE,
    BackendError,
    Outcome,
    RedisBackend,
)
from simulator.backends.run_marks import mark_redis_run, redis_mark_key
from simulator.backends.virtual_expiry import PRELOADED_SHIM, shim_expression

__all__ = ["CLUSTER_KINDS", "BackendError", "BackendSpec", "Outcome", "RedisBackend",
           "open_redis_backend"]

BACKEND_HINT = ("'memory', 'valkey' (the lab's engine), 'fakeredis', 'redis://HOST:PORT/DB', "
                "'redis-cluster' or 'valkey-cluster' (a throwaway local cluster of "
                "redis-server or of the engine's Valkey nodes), "
                "'postgresql://USER@HOST:PORT/DB' or 'postgresql' (a throwaway local server)")
CLUSTER_KINDS = ("redis-cluster", "valkey-cluster")
"""The backends that are a throwaway real cluster (``local_cluster``)."""


@dataclass(frozen=True, slots=True)
class BackendSpec:
    kind: str  # "memory" | "valkey" | "fakeredis" | "redis" | "redis-cluster" |
    #            "valkey-cluster" | "postgresql"
    url: str | None = None

    @classmethod
    def parse(cls, text: str) -> BackendSpec:
        text = text.strip()
        if text in ("memory", ENGINE, "fakeredis", "postgresql", *CLUSTER_KINDS):
            return cls(text)
        if text.startswith(tuple(f"{kind}://" for kind in CLUSTER_KINDS)):
            raise ValueError("a cluster of your own is not supported yet: give "
                             "'redis-cluster' or 'valkey-cluster' (a throwaway local cluster "
                             "the lab starts, shaped as the scenario's [server] cluster)")
        if text.startswith(("redis://", "rediss://", "unix://")):
            return cls("redis", text)
        if text.startswith(("postgresql://", "postgres://")):
            return cls("postgresql", text)
        raise ValueError(f"expected a backend: {BACKEND_HINT}, got {text!r}")

    @property
    def family(self) -> str:
        """``memory``, ``redis`` (fakeredis and a real server run the same
        stores) or ``postgresql``."""
        return "redis" if self.kind in (ENGINE, "fakeredis", *CLUSTER_KINDS) else self.kind

    def __str__(self) -> str:
        return self.url or self.kind


def is_loopback(host: str) -> bool:
    try:
        return all(
            ipaddress.ip_address(info[4][0]).is_loopback
            for info in socket.getaddrinfo(host, None)
        )
    except (OSError, ValueError):
        return False


def preload_shim(client: Any, server: Any) -> bool:
    """Compile the virtual-expiry shim once into a fakeredis server's Lua
    runtime, so each script sent need only call it (``wrap_preloaded``): the
    fallback for a fakeredis without Redis Functions (``open_redis_backend``).

    fakeredis keeps one Lua runtime per server and refuses scripts that leave
    new globals behind; the shim's one global is registered as expected. This
    relies on fakeredis internals (``_lua_runtime``, ``_lua_expected_globals``,
    fakeredis 2.3x/2.4x); where they are missing, nothing is preloaded and
    every script carries the whole shim, as on a real server: slower, same
    results.
    """
    client.eval("return 1", 0)  # fakeredis builds its Lua runtime on first use
    runtime = getattr(server, "_lua_runtime", None)
    expected = getattr(server, "_lua_expected_globals", None)
    if runtime is None or not isinstance(expected, set):
        return False
    before = set(runtime.globals().keys())
    runtime.execute(f"{PRELOADED_SHIM} = {shim_expression()}")
    expected.update(set(runtime.globals().keys()) - before)
    return True


def require_loopback(url: str, allow_remote: bool, what_the_lab_does: str) -> None:
    """Refuse a server that is not on this machine unless the user said it is theirs."""
    parsed = urlparse(url)
    if parsed.scheme != "unix" and not allow_remote and not is_loopback(parsed.hostname or ""):
        raise ValueError(
            f"refusing to run against {url}: it is not a loopback address. The lab "
            f"{what_the_lab_does}; pass --allow-remote if that server is yours to use."
        )


def lab_client(url: str) -> redis.Redis:
    """The lab's own connection to a real server: replies decoded, no retry
    (a re-sent script would run twice), a 30 s bound on a reply."""
    return redis.Redis.from_url(url, decode_responses=True, retry=Retry(NoBackoff(), 0),
                                socket_timeout=30)


def open_redis_backend(spec: BackendSpec, allow_remote: bool = False) -> RedisBackend:
    """A fresh fakeredis, a server of the lab's engine to itself, or a
    connection to a real server under a new prefix.

    Either way the run's scripts load as a Functions library of its own where
    the server allows it (``FunctionsLibrary``), or go by EVALSHA where not.
    """
    # Random, not seeded: it only keeps concurrent runs on one server apart and
    # never reaches a result (key and function names are not traced).
    token = secrets.token_hex(6)
    if spec.kind == "fakeredis":
        import fakeredis

        server = fakeredis.FakeServer()
        client = fakeredis.FakeRedis(server=server, decode_responses=True)
        library = FunctionsLibrary.offered(client, f"lab_{token}")
        return RedisBackend(client, "fakeredis", namespace=EMBEDDED_NAMESPACE, owns_server=True,
                            shim_preloaded=library is None and preload_shim(client, server),
                            library=library)
    if spec.kind == ENGINE:
        return _engine_backend(token)
    assert spec.url is not None
    require_loopback(spec.url, allow_remote,
                     "writes keys there (under its own prefix, removed afterwards)")
    client = lab_client(spec.url)
    try:
        client.ping()
        # Marked first: whatever the run leaves if it is killed, clean can find.
        mark_redis_run(client, token)
        library = FunctionsLibrary.offered(client, f"lab_{token}")
    except (redis.exceptions.ConnectionError, OSError) as error:
        raise BackendError(f"cannot reach {spec.url}: {error}") from error
    return RedisBackend(client, spec.url, namespace=f"lab:{token}:", owns_server=False,
                        mark_key=redis_mark_key(token),
                        library=library)


def _engine_backend(token: str) -> RedisBackend:
    """A run on a server of the lab's engine, leased for the run: the whole
    server is the run's (as a fakeredis is), given back emptied at close."""
    server = engine.lease()
    try:
        client = lab_client(server.url)
        library = FunctionsLibrary.offered(client, f"lab_{token}")
    except BaseException as error:
        engine.give_back(server)
        if isinstance(error, redis.exceptions.ConnectionError | OSError):
            raise BackendError(f"cannot reach the Valkey engine: {error}") from error
        raise
    backend = RedisBackend(client, ENGINE, namespace=EMBEDDED_NAMESPACE, owns_server=True,
                           library=library)
    backend.closed_with = lambda: engine.give_back(server)
    return backend
