"""The lease limiter's acquire under asyncio, on fakeredis and a real server.

axond's test cases of the acquire path, ported: the limit, the TTL, the
unavailable policy, the caller's timeout against the invoke's liveness
deadline, compensation of abandoned acquires, generations, the shared
invoke cap, boot. Each names, in its docstring, what stands in for the
seed's TCP relay or stub server (``test_lease_relay.Relay``). Where a stub
dictated the script's answer, the real script is brought to the same answer
(the limit filled first, or left room).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import fakeredis
import pytest
from redis_server import free_port
from relay_clock import RelayClock
from test_lease_relay import Mode, Relay, backend_connector, eventually, lease_settings, run

from stores.asyncio_runtime import AsyncioRuntime
from stores.axond_leases import LeaseLimiter
from stores.axond_leases.contract import (
    Denial,
    LeaseConnectError,
    LeaseConnectTimeout,
    LeaseKey,
    UnavailablePolicy,
)
from stores.redis_connector import RedisConnector

KEY = LeaseKey("acme", "subject")


@pytest.fixture
def target(backend_name, request):
    """Connections to the parametrised backend, for a limiter or a relay."""
    return backend_connector(backend_name, request)


async def abort(task: asyncio.Task) -> None:
    """Cancel a caller's task and let it end (it may have finished first)."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def held_leases(connector, limiter: LeaseLimiter) -> dict[str, str]:
    """The leases the store holds for ``KEY``, read on a connection of its own."""
    connection = await connector.connect()
    try:
        return await connection.hgetall(limiter.key(KEY))
    finally:
        await connection.aclose()


def test_two_limiters_sharing_one_redis_enforce_one_limit(target, key_prefix):
    settings = lease_settings(key_prefix, lease_ttl="300s", timeout="250ms",
                              connect_timeout="250ms")

    async def scenario() -> None:
        first = await LeaseLimiter.connect(target, AsyncioRuntime(), settings)
        second = await LeaseLimiter.connect(target, AsyncioRuntime(), settings)
        try:
            held = await first.acquire(KEY)
            assert held.is_allowed and held.permit.enforced
            assert (await second.acquire(KEY)).denial is Denial.EXCEEDED
            held.permit.release()
            await asyncio.sleep(0.1)
            released = await second.acquire(KEY)
            assert released.is_allowed, "dropping the permit did not release its lease"
            released.permit.release()
        finally:
            await first.aclose()
            await second.aclose()

    run(scenario())


def test_an_abandoned_lease_is_reclaimed_after_ttl(target, key_prefix):
    """The seed's 40 ms TTL is 200 ms here, so a loaded machine cannot let
    the lease expire before the second acquire looks."""
    settings = lease_settings(key_prefix, lease_ttl="200ms", timeout="250ms",
                              connect_timeout="250ms")

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(target, AsyncioRuntime(), settings)
        try:
            held = await limiter.acquire(KEY)
            assert held.is_allowed  # and never released: its replica "forgot" it
            assert (await limiter.acquire(KEY)).denial is Denial.EXCEEDED
            await asyncio.sleep(0.3)
            assert (await limiter.acquire(KEY)).is_allowed, "expired lease was not reclaimed"
        finally:
            await limiter.aclose()

    run(scenario())


def test_unavailable_redis_denies_within_timeout_and_recovers(target, key_prefix):
    """The seed's TCP relay: blackholed, then cut, then forwarding again. Its
    bounds (no sooner than the 50 ms timeout, within 2 s; recovered within
    2 s) in the virtual time of a ``RelayClock``, so a loaded machine's slow
    connects never count against them."""
    clock = RelayClock()
    relay = Relay(target, clock=clock)
    timeout_ms = 50

    async def scenario() -> None:
        deny = await LeaseLimiter.connect(relay, clock, lease_settings(key_prefix))
        allow = await LeaseLimiter.connect(relay, clock, lease_settings(
            f"{key_prefix}:allow", on_unavailable="allow"))
        try:
            relay.set_mode(Mode.BLACKHOLE)
            started = clock.now_ms()
            assert (await deny.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE
            elapsed = clock.now_ms() - started
            assert elapsed >= timeout_ms, f"returned before operation timeout: {elapsed} ms"
            assert elapsed < 2_000, f"unavailable acquire was not bounded: {elapsed} ms"
            assert (await allow.acquire(KEY)).is_allowed

            relay.set_mode(Mode.CUT)
            assert (await deny.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE

            relay.set_mode(Mode.FORWARD)
            deadline = clock.now_ms() + 2_000
            recovered = False
            while clock.now_ms() < deadline:
                if (await deny.acquire(KEY)).is_allowed:
                    recovered = True
                    break
                await clock.sleep_ms(25)
            assert recovered, "same limiter did not recover after relay forwarding was restored"
        finally:
            await relay.aclose()

    run(scenario())


def test_dropped_response_leaves_shared_manager_usable_for_next_acquire(target, key_prefix):
    """The seed's live stub grants every acquire; the real script needs room
    for two leases to do the same (the abandoned one is released only later)."""
    relay = Relay(target)

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, AsyncioRuntime(),
                                             lease_settings(key_prefix, max_in_flight=2))
        try:
            acquire = asyncio.create_task(limiter.acquire(KEY))
            await eventually(lambda: relay.count("acquire") >= 1, 1,
                             "acquire did not reach the relay")
            await abort(acquire)
            assert (await limiter.acquire(KEY)).is_allowed
            assert relay.count("acquire") >= 2, \
                "the next acquire should reuse the shared connection, still healthy"
            assert len(relay.connections) == 1 and limiter.generation == 1
        finally:
            await relay.aclose()

    run(scenario())


def test_abandoned_acquire_compensates_a_lease_created_later(target, key_prefix):
    """The seed's live stub answering 100 ms late; here the relay holds the
    acquire 100 ms before the server runs it, after its caller was aborted."""
    relay = Relay(target)

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(key_prefix))
        try:
            relay.delay_ms["acquire"] = 100
            acquire = asyncio.create_task(limiter.acquire(KEY))
            await eventually(lambda: relay.count("acquire") >= 1, 1,
                             "acquire did not reach the relay")
            await abort(acquire)

            await eventually(lambda: relay.count("release") >= 1, 1,
                             "the lease created after its caller left was not released")
            await asyncio.sleep(0.05)  # the release reached the server; let it run
            assert await held_leases(target, limiter) == {}
        finally:
            await relay.aclose()

    run(scenario())


def test_shared_invoke_cap_refusal_leaves_connection_usable(target, key_prefix):
    """The seed's bound: refused within 100 ms (here in virtual time, so a
    refusal that queued would fail it and a slow machine cannot)."""
    clock = RelayClock()
    relay = Relay(target, clock=clock)

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, clock,
                                             lease_settings(key_prefix, timeout="1s"))
        try:
            slots = limiter.recovery.invoke_slots
            taken = [slots.try_take() for _ in range(limiter.settings.shared_invoke_concurrency)]
            assert all(slot is not None for slot in taken)
            admission = await clock.timeout_ms(100, limiter.acquire(KEY))  # refused, not queued
            assert admission.denial is Denial.STORE_UNAVAILABLE
            for slot in taken:
                slot.release()
            assert limiter.suspect_generation == 0, \
                "healthy connection was retired by invoke-cap saturation"
            assert (await limiter.acquire(KEY)).is_allowed, \
                "connection did not remain usable after cap refusal"
        finally:
            await relay.aclose()

    run(scenario())


def test_retired_invoke_reclaims_its_shared_permit(target, key_prefix):
    """The seed's live stub delaying acquires by 5 s: the invoke outlives its
    liveness deadline (4 x the 50 ms timeout)."""
    relay = Relay(target)

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(key_prefix))
        try:
            slots = limiter.recovery.invoke_slots
            held = [slots.try_take() for _ in range(slots.capacity - 1)]
            relay.delay_ms["acquire"] = 5_000
            generation = limiter.generation
            assert (await limiter.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE
            reclaimed = None

            def slot_returned() -> bool:
                nonlocal reclaimed
                reclaimed = slots.try_take()
                return reclaimed is not None

            await eventually(slot_returned, 1, "retired invoke did not return its invoke slot")
            assert (limiter.suspect_generation >= generation
                    or limiter.generation > generation), \
                "an invoke past its deadline should retire or replace its connection"
            for slot in [*held, reclaimed]:
                slot.release()
        finally:
            await relay.aclose()

    run(scenario())


def test_unavailable_policy_is_exercised_through_hermetic_acquire(target, key_prefix):
    """The seed's stub answers the boot PING, then nothing: here the relay
    forwards the boot, then blackholes."""
    relay = Relay(target)

    async def scenario() -> None:
        deny = await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(key_prefix))
        allow = await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(
            f"{key_prefix}:allow", on_unavailable=UnavailablePolicy.ALLOW))
        try:
            relay.set_mode(Mode.BLACKHOLE)
            assert (await deny.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE
            assert (await allow.acquire(KEY)).is_allowed
        finally:
            await relay.aclose()

    run(scenario())


def test_shared_invoke_cap_refusal_does_not_poison_or_retry_release(target, key_prefix):
    """The seed's retry stub counting connections and release commands."""
    relay = Relay(target)

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(key_prefix))
        try:
            slots = limiter.recovery.invoke_slots
            taken = [slots.try_take() for _ in range(slots.capacity)]
            assert (await limiter.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE
            loop = asyncio.get_running_loop()
            until = loop.time() + 0.3
            while loop.time() < until:
                assert len(relay.connections) == 1, "cap saturation poisoned the healthy manager"
                await asyncio.sleep(0.01)
            assert limiter.suspect_generation == 0, "cap saturation retired a healthy generation"
            assert not any(kind == "release" for kind, _ in relay.sent)
            assert relay.count("release") == 0
            for slot in taken:
                slot.release()
        finally:
            await relay.aclose()

    run(scenario())


def test_connect_timeout_is_bounded_when_ping_never_answers(target, key_prefix):
    """The seed's stub that never answers PING; here the relay's ``hang_ping``."""
    relay = Relay(target)
    relay.hang_ping = True

    async def scenario() -> None:
        try:
            started = time.monotonic()
            with pytest.raises(LeaseConnectTimeout, match="timed out after 40ms"):
                await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(
                    key_prefix, timeout="250ms", connect_timeout="40ms", lease_ttl="1s"))
            elapsed = time.monotonic() - started
            assert elapsed < 0.5, f"connect timeout was not bounded: {elapsed}"
        finally:
            await relay.aclose()

    run(scenario())


def test_timed_out_acquire_releases_an_ambiguous_redis_lease(target, key_prefix):
    """The seed's TCP relay stalling responses: the acquire runs, its reply is lost."""
    relay = Relay(target)

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(key_prefix))
        try:
            relay.set_mode(Mode.STALL)
            assert (await limiter.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE
            relay.set_mode(Mode.FORWARD)

            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                if (await limiter.acquire(KEY)).is_allowed:
                    return
                await asyncio.sleep(0.025)
            pytest.fail("timed-out acquire left a lease consuming the subject slot")
        finally:
            await relay.aclose()

    run(scenario())


def test_unreachable_server_fails_at_boot(backend_name, key_prefix):
    """Nothing listens: a port nobody holds (real Redis), a disconnected
    ``FakeServer`` (fakeredis)."""
    if backend_name == "fakeredis":
        server = fakeredis.FakeServer()
        server.connected = False
        connector = RedisConnector(lambda: fakeredis.aioredis.FakeRedis(server=server,
                                                                         decode_responses=True))
    else:
        connector = RedisConnector.from_url(f"redis://127.0.0.1:{free_port()}/0")

    async def scenario() -> None:
        with pytest.raises(LeaseConnectError, match="Redis connection failed"):
            await LeaseLimiter.connect(connector, AsyncioRuntime(), lease_settings(
                key_prefix, timeout="10ms", connect_timeout="500ms", lease_ttl="1s"))

    run(scenario())


# -- beyond the seed's cases: each pins one rule its tests reach only together


def test_an_invoke_abandoned_at_its_deadline_releases_its_lease(target, key_prefix):
    """The acquire runs but its reply is lost, and nothing else is sent on the
    connection (no later reply can shift onto it): only the ambiguous outcome
    at the invoke's deadline can release the lease, on a fresh connection
    since its generation is then retired."""
    relay = Relay(target)

    async def scenario() -> None:
        limiter = await LeaseLimiter.connect(relay, AsyncioRuntime(), lease_settings(key_prefix))
        try:
            relay.set_mode(Mode.STALL)
            assert (await limiter.acquire(KEY)).denial is Denial.STORE_UNAVAILABLE
            relay.set_mode(Mode.FORWARD)
            assert await held_leases(target, limiter) != {}
            await eventually(lambda: relay.count("release") >= 1, 1.5,
                             "the ambiguous acquire's lease was never released")
            assert relay.reached["release"][0] > 1, "released on the retired connection"
            await asyncio.sleep(0.05)  # the release reached the server; let it run
            assert await held_leases(target, limiter) == {}
            assert limiter.suspect_generation >= 1
        finally:
            await relay.aclose()

    run(scenario())
