"""The production ``Connector``: new ``redis.asyncio`` connections on demand.

A store that manages its own connections (the lease limiter: one shared
connection, replaced when it goes bad, and fresh ones for release retries)
gets a ``Connector`` rather than a client. Each ``connect`` builds a new
client from ``factory`` -- one connection: ``single_connection_client=True``
(``from_url``), or a fakeredis client on a shared ``FakeServer`` -- and has
it answer a ``PING`` before handing it over, so a connection that cannot
reach its server fails (or hangs, for the caller's timeout to bound) here,
not on first use.

Retries stay off: a driver that re-sends a timed-out script executes it
twice (DESIGN, "Known traps"), and these stores decide themselves what to
retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff


class RedisConnector:
    """``stores.ports.Connector`` over clients ``factory`` builds."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisConnector:
        """Connections to the server at ``url`` (``options`` go to
        ``redis.asyncio.Redis.from_url``)."""
        def factory() -> aioredis.Redis:
            return aioredis.Redis.from_url(url, decode_responses=True,
                                           single_connection_client=True,
                                           retry=Retry(NoBackoff(), 0), **options)
        return cls(factory)

    async def connect(self) -> Any:
        client = self.factory()
        try:
            await client.ping()
        except BaseException:
            # Failed, or the caller's timeout cancelled the PING: a client
            # nobody will use must not keep its socket.
            await client.aclose()
            raise
        return client
