"""Which Redis an av_state store starts on: the seed's transport rules and its
pool's start-up, through the production constructor ``RedisStateStore.from_url``."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis_server import free_port

from stores.asyncio_runtime import AsyncioRuntime
from stores.av_state import RedisStateStore, validate_transports
from stores.av_state.contract import BackendError
from stores.av_state.redis_store import POOL_MAX_CONNECTIONS, POOL_WAIT_SECONDS


def test_tls_is_enabled_and_verification_cannot_be_disabled():
    validate_transports(["rediss://localhost:6379"])
    with pytest.raises(BackendError, match="verification cannot be disabled"):
        validate_transports(["rediss://localhost:6379/#insecure"])


@pytest.mark.parametrize("option", ["ssl_cert_reqs=none", "ssl_check_hostname=false"])
def test_redis_pys_own_ways_to_skip_verification_are_refused_too(option):
    with pytest.raises(BackendError, match="verification cannot be disabled"):
        validate_transports([f"rediss://localhost:6379/0?{option}"])


def test_cluster_seeds_cannot_mix_tls_and_plaintext():
    for nodes in (["rediss://one:6379", "redis://two:6379"],
                  ["redis://one:6379", "rediss://two:6379"]):
        with pytest.raises(BackendError, match="same transport"):
            validate_transports(nodes)
    validate_transports(["rediss://one:6379", "rediss://two:6379"])


def test_a_url_that_is_not_redis_is_refused_naming_it():
    with pytest.raises(BackendError, match="'http://one:6379' is not a Redis URL"):
        validate_transports(["http://one:6379"])


def test_from_url_validates_cluster_seeds_then_refuses_a_cluster_in_one_line():
    async def scenario():
        with pytest.raises(BackendError, match="same transport"):
            await RedisStateStore.from_url("rediss://one:6379, redis://two:6379",
                                           AsyncioRuntime())
        with pytest.raises(BackendError, match="Cluster .* not supported") as refused:
            await RedisStateStore.from_url("redis://one:6379,redis://two:6379",
                                           AsyncioRuntime())
        assert "\n" not in str(refused.value)

    asyncio.run(scenario())


def test_pool_startup_still_refuses_an_unavailable_backend():
    async def scenario():
        with pytest.raises(BackendError, match="did not answer at start-up"):
            await RedisStateStore.from_url(f"redis://127.0.0.1:{free_port()}/0",
                                           AsyncioRuntime())

    asyncio.run(scenario())


async def connections_named(url: str, name: str) -> int:
    observer = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        return sum(client.get("name") == name for client in await observer.client_list())
    finally:
        await observer.aclose()


def test_pool_verifies_one_connection_then_grows_on_demand_with_the_same_limits(redis_url):
    """The seed's r2d2 pool, as redis-py's: start-up needs one connection (not
    all 32), the pool grows to 32 on demand, a 33rd caller waits 2 s and fails,
    and returned connections serve again."""
    name = f"labtest-pool-{uuid.uuid4().hex[:8]}"

    async def scenario():
        store = await RedisStateStore.from_url(f"{redis_url}?client_name={name}",
                                               AsyncioRuntime())
        assert await connections_named(redis_url, name) == 1
        pool = store.data.connection_pool
        assert (pool.max_connections, pool.timeout) == (POOL_MAX_CONNECTIONS, POOL_WAIT_SECONDS)
        held = [await pool.get_connection() for _ in range(POOL_MAX_CONNECTIONS)]
        assert await connections_named(redis_url, name) == POOL_MAX_CONNECTIONS
        with pytest.raises(RedisConnectionError):
            await pool.get_connection()
        for connection in held:
            await pool.release(connection)
        assert await store.get(f"labtest:{name}:absent") == 0
        await store.data.aclose()

    asyncio.run(scenario())
