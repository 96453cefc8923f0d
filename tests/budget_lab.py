"""A test's own keyspace on one Redis backend, for the budget store tests.

``Lab`` gives each test fresh clients (one per replica, as in production) on
fakeredis or on the session's real server, stores of either layout, and a
raw client to read and write keys behind the store's back. The ``lab``
fixture (``conftest.py``) builds one per test and backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import fakeredis
import redis.asyncio as aioredis
from manual_runtime import ManualRuntime
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from stores.axond_budget.contract import BudgetKey, SharedSettings
from stores.axond_budget.migration import MigrationReport, migrate_v1_to_v2
from stores.axond_budget.redis_budget import RedisBudget, namespace_scope, v1_keys, v2_keys

NAMESPACES = ("acme",)
"""The namespace ids a test configures, for attributing v1 keys."""


def in_acme(subject: str) -> BudgetKey:
    return BudgetKey("acme", subject)


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run a test's async ``scenario`` to completion."""
    return asyncio.run(scenario())


class Lab:
    """One test's keyspace on one backend: clients, stores and raw reads."""

    def __init__(self, backend_name: str, url: str | None, key_prefix: str) -> None:
        self.backend_name = backend_name
        self.url = url
        self.prefix = key_prefix
        self.server = fakeredis.FakeServer()
        self.raw = None

    def client(self):
        """A fresh client on this test's server (one per replica, as in production)."""
        if self.backend_name == "fakeredis":
            return fakeredis.aioredis.FakeRedis(server=self.server, decode_responses=True)
        return aioredis.Redis.from_url(self.url, decode_responses=True,
                                       retry=Retry(NoBackoff(), 0))

    @property
    def redis(self):
        """The test's own client, for writing and reading keys behind the store's back."""
        if self.raw is None:
            self.raw = self.client()
        return self.raw

    def settings(self, subject_cap: int, namespace_cap: int | None = None,
                 ttl: str = "5m") -> SharedSettings:
        return SharedSettings(subject_cap_microdollars=subject_cap,
                              namespace_cap_microdollars=namespace_cap,
                              reservation_ttl=ttl, key_prefix=self.prefix)

    async def v1(self, cap: int = 1_000, runtime: ManualRuntime | None = None) -> RedisBudget:
        """A store without the namespace cap (the v1 layout)."""
        return await RedisBudget.connect(self.client(), runtime or ManualRuntime(),
                                         self.settings(cap))

    async def v2(self, subject_cap: int = 1_000, namespace_cap: int = 1_000, ttl: str = "5m",
                 runtime: ManualRuntime | None = None) -> RedisBudget:
        """A store with the namespace cap (the v2 layout)."""
        return await RedisBudget.connect(self.client(), runtime or ManualRuntime(),
                                         self.settings(subject_cap, namespace_cap, ttl))

    async def migrate(self, namespaces: tuple[str, ...] = NAMESPACES) -> MigrationReport:
        return await migrate_v1_to_v2(self.client(), self.prefix, namespaces)

    async def namespace_store(self, subject_cap: int = 1_000, namespace_cap: int = 1_000,
                              ttl: str = "5m",
                              runtime: ManualRuntime | None = None) -> RedisBudget:
        """A v2 store on a migrated keyspace: a fresh prefix has nothing to
        carry, so the migration only stamps the marker the store requires."""
        await self.migrate()
        return await self.v2(subject_cap, namespace_cap, ttl, runtime)

    async def spent(self, key: BudgetKey) -> int:
        return int(await self.redis.get(v2_keys(self.prefix, key).subject_spent) or 0)

    async def namespace_spent(self, namespace: str) -> int:
        return int(await self.redis.get(f"{namespace_scope(self.prefix, namespace)}"
                                        ":namespace:spent") or 0)

    def v1_spent_key(self, key: BudgetKey) -> str:
        return v1_keys(self.prefix, key)[0]
