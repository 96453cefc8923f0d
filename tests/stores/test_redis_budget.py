"""The v1 Redis budget store under plain asyncio, on fakeredis and real Redis.

The same class the simulator drives, here against ``fakeredis.aioredis`` and
a real ``redis-server`` through ``redis.asyncio``: the seeds' own tests of the
store, ported.
"""

from __future__ import annotations

import asyncio

import fakeredis
import pytest
import redis.asyncio as aioredis
from manual_runtime import ManualRuntime
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis_server import free_port

from stores.axond_budget.contract import (
    Admission,
    BudgetError,
    BudgetKey,
    Denial,
    SharedSettings,
    UnavailablePolicy,
)
from stores.axond_budget.redis_budget import RedisBudget, layout_key, v1_keys

KEY = BudgetKey("acme", "GW_INBOUND_ACME_KEY")


def client_for(backend_name: str, url: str | None, server: object = None):
    if backend_name == "fakeredis":
        return fakeredis.aioredis.FakeRedis(server=server, decode_responses=True)
    return aioredis.Redis.from_url(url, decode_responses=True, retry=Retry(NoBackoff(), 0))


@pytest.fixture
def connect(backend_name, request, key_prefix):
    """``connect(runtime, cap=..., ttl=...)``: a store on the shared test server."""
    url = request.getfixturevalue("redis_url") if backend_name != "fakeredis" else None
    shared = fakeredis.FakeServer()

    async def make(runtime: ManualRuntime, cap: int = 1_000, ttl: str = "5m") -> RedisBudget:
        settings = SharedSettings(subject_cap_microdollars=cap, reservation_ttl=ttl,
                                  key_prefix=key_prefix)
        return await RedisBudget.connect(client_for(backend_name, url, shared), runtime,
                                         settings)

    return make


def test_two_stores_sharing_one_server_enforce_a_single_cap(connect):
    async def scenario():
        replica_a = await connect(ManualRuntime(id_prefix="a"))
        replica_b = await connect(ManualRuntime(id_prefix="b"))
        held = await replica_a.reserve(KEY, 700)
        assert held.is_allowed
        # The second replica sees the first one's outstanding hold.
        assert await replica_b.reserve(KEY, 700) == Admission.exceeded()
        await replica_a.settle(KEY, held.reservation, 100)
        # The unused part of the estimate is free again, for the other replica.
        second = await replica_b.reserve(KEY, 700)
        assert second.is_allowed
        await replica_b.settle(KEY, second.reservation, 700)
        # 100 + 700 settled leave no room for 300.
        assert await replica_a.reserve(KEY, 300) == Admission.exceeded()

    asyncio.run(scenario())


def test_an_outstanding_hold_counts_against_the_cap(connect):
    async def scenario():
        store = await connect(ManualRuntime())
        held = await store.reserve(KEY, 700)
        assert held.is_allowed
        assert (await store.reserve(KEY, 700)).denial is Denial.EXCEEDED
        await store.settle(KEY, held.reservation, 100)
        assert (await store.reserve(KEY, 700)).is_allowed

    asyncio.run(scenario())


def test_releasing_frees_the_whole_estimate(connect):
    async def scenario():
        store = await connect(ManualRuntime())
        held = await store.reserve(KEY, 1_000)
        assert (await store.reserve(KEY, 1)).denial is Denial.EXCEEDED
        await store.release(KEY, held.reservation)
        assert (await store.reserve(KEY, 1_000)).is_allowed

    asyncio.run(scenario())


def test_an_expired_hold_stops_counting_against_the_cap(connect):
    async def scenario():
        runtime = ManualRuntime()
        # Long enough that the server's own (wall-clock) key TTL never fires
        # mid-test: only the deadline logic, on the test's clock, is exercised.
        store = await connect(runtime, ttl="10s")
        # A replica that died holding this estimate never settles it.
        assert (await store.reserve(KEY, 900)).is_allowed
        assert (await store.reserve(KEY, 900)).denial is Denial.EXCEEDED
        runtime.advance_ms(9_999)
        assert (await store.reserve(KEY, 900)).denial is Denial.EXCEEDED
        runtime.advance_ms(1)
        assert (await store.reserve(KEY, 900)).is_allowed

    asyncio.run(scenario())


def test_a_settlement_of_an_expired_hold_still_charges(connect):
    async def scenario():
        runtime = ManualRuntime()
        store = await connect(runtime, ttl="10s")
        held = await store.reserve(KEY, 500)
        runtime.advance_ms(10_001)
        await store.settle(KEY, held.reservation, 800)
        # Nothing is held any more, but 800 was spent: 300 fits, 201 does not.
        assert (await store.reserve(KEY, 201)).denial is Denial.EXCEEDED
        assert (await store.reserve(KEY, 200)).is_allowed

    asyncio.run(scenario())


def test_a_keys_spend_and_holds_share_one_hash_slot():
    spent, holds = v1_keys("axond:budget", KEY)
    assert spent == "axond:budget:{acme|GW_INBOUND_ACME_KEY}:spent"
    assert holds == "axond:budget:{acme|GW_INBOUND_ACME_KEY}:reservations"


@pytest.mark.parametrize("marker", ["v2", "v2-migrating"])
def test_the_v1_store_refuses_to_boot_on_migrated_state(backend_name, request, key_prefix,
                                                        marker):
    url = request.getfixturevalue("redis_url") if backend_name != "fakeredis" else None

    async def scenario():
        client = client_for(backend_name, url, fakeredis.FakeServer())
        await client.set(layout_key(key_prefix), marker)
        settings = SharedSettings(key_prefix=key_prefix)
        with pytest.raises(BudgetError, match="migrat"):
            await RedisBudget.connect(client, ManualRuntime(), settings)
        await client.delete(layout_key(key_prefix))

    asyncio.run(scenario())


def unreachable_client():
    """A client for a loopback port nobody listens on."""
    return aioredis.Redis(port=free_port(), decode_responses=True, retry=Retry(NoBackoff(), 0),
                          socket_connect_timeout=1)


def test_an_unreachable_server_fails_the_boot():
    async def scenario():
        with pytest.raises(BudgetError, match="did not answer"):
            await RedisBudget.connect(unreachable_client(), ManualRuntime(), SharedSettings())

    asyncio.run(scenario())


def test_an_unreachable_server_denies_by_default():
    async def scenario():
        store = RedisBudget(unreachable_client(), ManualRuntime(), SharedSettings())
        assert await store.reserve(KEY, 100) == Admission.unavailable()

    asyncio.run(scenario())


def test_an_unreachable_server_admits_unenforced_when_told_to():
    async def scenario():
        settings = SharedSettings(on_unavailable=UnavailablePolicy.ALLOW)
        store = RedisBudget(unreachable_client(), ManualRuntime(), settings)
        admission = await store.reserve(KEY, 100)
        assert admission.is_allowed
        assert not admission.reservation.is_held
        # Settling a reservation that holds nothing sends nothing.
        await store.settle(KEY, admission.reservation, 100)

    asyncio.run(scenario())


def test_a_negative_amount_is_refused_before_it_reaches_the_server(connect):
    async def scenario():
        store = await connect(ManualRuntime())
        with pytest.raises(ValueError, match="micro-dollars >= 0"):
            await store.reserve(KEY, -5)
        held = await store.reserve(KEY, 5)
        with pytest.raises(ValueError, match="micro-dollars >= 0"):
            await store.settle(KEY, held.reservation, -1)

    asyncio.run(scenario())
