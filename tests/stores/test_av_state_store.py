"""The av_state counter contract, method by method: the Redis store on
fakeredis and on a real ``redis-server``, and, where the contract is shared,
the in-memory twin too.

Each test runs a store under plain asyncio (``AsyncioRuntime``) in its own key
prefix, reads the server with a client of its own (TTLs with ``PTTL``), and
deletes its keys afterwards; nothing is ever flushed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis_server import free_port

from stores.asyncio_runtime import AsyncioRuntime
from stores.av_state import KINDS, InMemoryStateStore, RedisStateStore, decode, read_ledgers
from stores.av_state.contract import (
    COUNTER_TTL_SECONDS,
    EMPTY_BATCH_REMAINING,
    I64_MAX,
    JCS_SAFE_MAX,
    REFUND_MARKER_TTL_SECONDS,
    BackendError,
    Committed,
    CounterOverflow,
    DuplicateSpendKey,
    Refund,
    Refused,
    Spend,
)
from stores.av_state.keys import refund_marker_key
from stores.scripts import ScriptSet

DAY_MS = COUNTER_TTL_SECONDS * 1_000
# A test's calls take well under this; a TTL within it of a day is "fresh".
SLACK_MS = 10_000


@dataclass
class Bench:
    """One test's store, the client it reads the server with (``None`` for the
    in-memory twin) and the session its counters live in."""

    store: Any
    reader: Any
    prefix: str

    def key(self, name: str) -> str:
        return f"{self.prefix}:{{session}}:{name}"

    async def exists(self, key: str) -> bool:
        if self.reader is None:
            return key in read_ledgers(self.store)
        return bool(await self.reader.exists(key))

    async def pttl(self, key: str) -> int:
        return await self.reader.pttl(key)


class FixedIdRuntime(AsyncioRuntime):
    """Every id the same: two refunds then send the same marker, exactly what a
    driver re-sending a refund whose reply was lost sends."""

    def new_id(self) -> str:
        return "replayed"


def client(backend: str, url: str | None, server: Any) -> Any:
    if backend == "fakeredis":
        return fakeredis.aioredis.FakeRedis(server=server, decode_responses=True)
    return aioredis.Redis.from_url(url, decode_responses=True, retry=Retry(NoBackoff(), 0))


Scenario = Callable[[Bench], Awaitable[None]]


def runner(backend: str, url: str | None, prefix: str, scripts: ScriptSet | None = None,
           store_class: type[RedisStateStore] = RedisStateStore) -> Callable[..., None]:
    """``run(scenario, runtime=None)``: the scenario against a fresh store
    (on Redis, a ``store_class`` running ``scripts``: a variant's, or by
    default the shipped store and scripts)."""

    def run(scenario: Scenario, runtime: AsyncioRuntime | None = None) -> None:
        async def main() -> None:
            if backend == "memory":
                await scenario(Bench(InMemoryStateStore(), None, prefix))
                return
            server = fakeredis.FakeServer()
            data, reader = client(backend, url, server), client(backend, url, server)
            store = await store_class.connect(data, runtime or AsyncioRuntime(), scripts)
            try:
                await scenario(Bench(store, reader, prefix))
            finally:
                cursor = 0
                while True:
                    cursor, keys = await reader.scan(cursor, match=f"{prefix}*", count=500)
                    if keys:
                        await reader.delete(*keys)
                    if cursor == 0:
                        break
                await data.aclose()
                await reader.aclose()

        asyncio.run(main())

    return run


@pytest.fixture(params=["fakeredis", "redis", "valkey", "memory"])
def on_every_backend(request, key_prefix):
    """Runs a scenario of the shared contract on each store."""
    url = request.getfixturevalue("redis_url") if request.param in ("redis", "valkey") else None
    return runner(request.param, url, key_prefix)


@pytest.fixture
def on_redis(backend_name, request, key_prefix):
    """Runs a scenario of the Redis store alone, on fakeredis and real Redis."""
    url = request.getfixturevalue("redis_url") if backend_name != "fakeredis" else None
    return runner(backend_name, url, key_prefix)


# -- try_spend_many ------------------------------------------------------------


def test_a_refusal_names_the_first_key_past_its_limit_and_charges_nothing(on_every_backend):
    async def scenario(bench: Bench) -> None:
        tokens, calls, tool = bench.key("tokens"), bench.key("calls"), bench.key("tool")
        await bench.store.add(tokens, 90)
        await bench.store.add(calls, 9)
        outcome = await bench.store.try_spend_many(
            [Spend(tool, 1, 5), Spend(tokens, 20, 100), Spend(calls, 2, 10)])
        # Both tokens and calls would pass their limits; tokens comes first.
        assert outcome == Refused(1)
        assert [await bench.store.get(key) for key in (tool, tokens, calls)] == [0, 90, 9]
        assert not await bench.exists(tool)

    on_every_backend(scenario)


def test_a_counter_already_past_its_limit_refuses_even_a_zero_spend(on_every_backend):
    async def scenario(bench: Bench) -> None:
        await bench.store.add(bench.key("tokens"), 50)
        assert await bench.store.try_spend(Spend(bench.key("tokens"), 0, 40)) == Refused(0)

    on_every_backend(scenario)


def test_a_commit_charges_every_key_and_returns_the_post_commit_min_remaining(on_every_backend):
    async def scenario(bench: Bench) -> None:
        tokens, calls = bench.key("tokens"), bench.key("calls")
        outcome = await bench.store.try_spend_many([Spend(tokens, 30, 100), Spend(calls, 8, 10)])
        assert outcome == Committed(2)
        assert await bench.store.try_spend_many(
            [Spend(tokens, 70, 100), Spend(calls, 1, 10)]) == Committed(0)
        assert (await bench.store.get(tokens), await bench.store.get(calls)) == (100, 9)

    on_every_backend(scenario)


def test_try_spend_is_a_batch_of_one(on_every_backend):
    async def scenario(bench: Bench) -> None:
        key = bench.key("calls")
        assert await bench.store.try_spend(Spend(key, 4, 5)) == Committed(1)
        assert await bench.store.try_spend(Spend(key, 2, 5)) == Refused(0)
        assert await bench.store.get(key) == 4

    on_every_backend(scenario)


def test_the_empty_batch_commits_with_the_u64_max_sentinel(on_every_backend):
    async def scenario(bench: Bench) -> None:
        assert await bench.store.try_spend_many([]) == Committed(EMPTY_BATCH_REMAINING)
        assert EMPTY_BATCH_REMAINING == 2**64 - 1

    on_every_backend(scenario)


def test_a_batch_naming_a_key_twice_is_refused_before_anything_runs(on_every_backend):
    async def scenario(bench: Bench) -> None:
        first, twice = bench.key("tool"), bench.key("tokens")
        with pytest.raises(DuplicateSpendKey) as refused:
            await bench.store.try_spend_many(
                [Spend(first, 1, 10), Spend(twice, 1, 10), Spend(twice, 1, 10)])
        assert refused.value.key == twice
        assert not await bench.exists(first)

    on_every_backend(scenario)


@pytest.mark.parametrize("amount, limit", [(JCS_SAFE_MAX + 1, JCS_SAFE_MAX),
                                           (1, JCS_SAFE_MAX + 1)])
def test_a_spend_past_the_json_safe_bound_overflows_naming_its_key(on_every_backend, amount,
                                                                    limit):
    async def scenario(bench: Bench) -> None:
        ok, past = bench.key("calls"), bench.key("tokens")
        with pytest.raises(CounterOverflow) as overflow:
            await bench.store.try_spend_many([Spend(ok, 1, 10), Spend(past, amount, limit)])
        assert overflow.value.key == past
        assert not await bench.exists(ok)

    on_every_backend(scenario)


def test_a_negative_amount_is_refused_before_it_reaches_the_store(on_every_backend):
    async def scenario(bench: Bench) -> None:
        with pytest.raises(ValueError, match=">= 0"):
            await bench.store.try_spend(Spend(bench.key("tokens"), -1, 10))
        with pytest.raises(ValueError, match=">= 0"):
            await bench.store.refund(bench.key("tokens"), -1)

    on_every_backend(scenario)


# -- add, get, fetch_max -------------------------------------------------------


def test_add_returns_the_new_value_and_overflows_past_the_json_safe_bound(on_every_backend):
    async def scenario(bench: Bench) -> None:
        key = bench.key("payout")
        assert await bench.store.add(key, 5) == 5
        assert await bench.store.add(key, JCS_SAFE_MAX - 5) == JCS_SAFE_MAX
        with pytest.raises(CounterOverflow):
            await bench.store.add(key, 1)
        with pytest.raises(CounterOverflow):
            await bench.store.add(bench.key("other"), JCS_SAFE_MAX + 1)
        assert await bench.store.get(key) == JCS_SAFE_MAX

    on_every_backend(scenario)


def test_get_reads_an_absent_counter_as_zero(on_every_backend):
    async def scenario(bench: Bench) -> None:
        assert await bench.store.get(bench.key("never_written")) == 0
        assert not await bench.exists(bench.key("never_written"))

    on_every_backend(scenario)


def test_fetch_max_raises_a_counter_and_never_lowers_it(on_every_backend):
    async def scenario(bench: Bench) -> None:
        key = bench.key("high_water")
        assert await bench.store.fetch_max(key, 0) == 0
        assert await bench.exists(key)  # an absent counter is written, even at 0
        assert await bench.store.fetch_max(key, 7) == 7
        assert await bench.store.fetch_max(key, 3) == 7
        assert await bench.store.get(key) == 7
        with pytest.raises(CounterOverflow):
            await bench.store.fetch_max(key, JCS_SAFE_MAX + 1)

    on_every_backend(scenario)


# -- refunds -------------------------------------------------------------------


def test_a_refund_credits_and_clamps_at_zero(on_every_backend):
    async def scenario(bench: Bench) -> None:
        key = bench.key("tokens")
        await bench.store.add(key, 10)
        await bench.store.refund(key, 4)
        assert await bench.store.get(key) == 6
        await bench.store.refund(key, 100)
        assert await bench.store.get(key) == 0
        assert await bench.exists(key)

    on_every_backend(scenario)


def test_a_refund_on_a_removed_key_does_not_resurrect_it(on_every_backend):
    async def scenario(bench: Bench) -> None:
        tokens, calls = bench.key("tokens"), bench.key("calls")
        await bench.store.try_spend_many([Spend(tokens, 5, 10), Spend(calls, 1, 10)])
        await bench.store.remove_prefix(f"{bench.prefix}:")
        await bench.store.refund(tokens, 5)
        await bench.store.refund_many([Refund(tokens, 5), Refund(calls, 1)])
        assert not await bench.exists(tokens)
        assert not await bench.exists(calls)

    on_every_backend(scenario)


def test_refund_many_with_an_amount_of_i64_max_is_exact_and_never_half_commits(
        on_every_backend):
    async def scenario(bench: Bench) -> None:
        first, huge, last = bench.key("calls"), bench.key("tokens"), bench.key("tool")
        for key, value in ((first, 10), (huge, JCS_SAFE_MAX), (last, 10)):
            await bench.store.add(key, value)
        await bench.store.refund_many(
            [Refund(first, 3), Refund(huge, I64_MAX), Refund(last, 4)])
        assert [await bench.store.get(key) for key in (first, huge, last)] == [7, 0, 6]

    on_every_backend(scenario)


@pytest.mark.parametrize("amount", [I64_MAX + 1, 2**64 - 1, 2**70])
def test_refund_amounts_beyond_i64_clamp_instead_of_failing(on_every_backend, amount, caplog):
    async def scenario(bench: Bench) -> None:
        one, first, second = bench.key("one"), bench.key("first"), bench.key("second")
        for key in (one, first, second):
            await bench.store.add(key, 9)
        with caplog.at_level(logging.WARNING, logger="stores.av_state"):
            await bench.store.refund(one, amount)
            await bench.store.refund_many([Refund(first, 1), Refund(second, amount)])
        assert [await bench.store.get(key) for key in (one, first, second)] == [0, 8, 0]
        assert not caplog.records

    on_every_backend(scenario)


def test_an_empty_refund_batch_does_nothing(on_every_backend):
    async def scenario(bench: Bench) -> None:
        await bench.store.refund_many([])
        if bench.reader is not None:
            assert await bench.reader.keys(f"{bench.prefix}*") == []

    on_every_backend(scenario)


# -- remove, remove_prefix -------------------------------------------------------


def test_remove_deletes_one_counter(on_every_backend):
    async def scenario(bench: Bench) -> None:
        gone, kept = bench.key("tokens"), bench.key("calls")
        await bench.store.add(gone, 3)
        await bench.store.add(kept, 4)
        await bench.store.remove(gone)
        await bench.store.remove(bench.key("never_written"))
        assert not await bench.exists(gone)
        assert await bench.store.get(kept) == 4

    on_every_backend(scenario)


@pytest.mark.parametrize("session, lookalike", [("s1", "s2"), ("s[1]*?", "s1ab"),
                                                 ("s\\1", "s1")])
def test_remove_prefix_removes_exactly_the_prefixs_keys(on_every_backend, session, lookalike):
    """A prefix with glob metacharacters is matched literally: unescaped,
    ``s[1]*?:`` would also match ``s1ab:`` and ``s\\1:`` would match ``s1:``."""
    async def scenario(bench: Bench) -> None:
        prefix = f"{bench.prefix}:{session}:"
        doomed = [f"{prefix}tokens", f"{prefix}calls", f"{prefix}tool:search"]
        kept = [f"{bench.prefix}:{lookalike}:tokens", f"{bench.prefix}:{session}",
                f"{bench.prefix}:x{session}:tokens"]
        for key in doomed + kept:
            await bench.store.add(key, 1)
        await bench.store.remove_prefix(prefix)
        assert [await bench.exists(key) for key in doomed] == [False] * len(doomed)
        assert [await bench.exists(key) for key in kept] == [True] * len(kept)

    on_every_backend(scenario)


def test_remove_prefix_pages_through_more_keys_than_one_scan_step(on_redis):
    async def scenario(bench: Bench) -> None:
        prefix = f"{bench.prefix}:{{big}}:"
        await bench.reader.mset({f"{prefix}{index}": 1 for index in range(1_234)})
        await bench.reader.set(f"{bench.prefix}:{{other}}:tokens", 1)
        await bench.store.remove_prefix(prefix)
        assert await bench.reader.keys(f"{bench.prefix}*") == [f"{bench.prefix}:{{other}}:tokens"]

    on_redis(scenario)


# -- the 24 h TTL and the replay markers (Redis) -----------------------------------


async def assert_fresh_ttl(bench: Bench, *keys: str) -> None:
    for key in keys:
        pttl = await bench.pttl(key)
        assert DAY_MS - SLACK_MS < pttl <= DAY_MS, f"{key}: PTTL {pttl}"


async def age(bench: Bench, *keys: str) -> None:
    """Give ``keys`` a short TTL, as if their last touch were a day ago."""
    for key in keys:
        await bench.reader.expire(key, 60)


def test_every_path_that_touches_a_counter_leaves_the_24h_ttl(on_redis):
    async def scenario(bench: Bench) -> None:
        store = bench.store
        spent, added, raised = bench.key("spent"), bench.key("added"), bench.key("raised")
        await store.try_spend(Spend(spent, 5, 10))
        await store.add(added, 5)
        await store.fetch_max(raised, 5)
        await assert_fresh_ttl(bench, spent, added, raised)
        await age(bench, spent, added, raised)
        await store.try_spend(Spend(spent, 1, 10))
        await store.add(added, 1)
        await store.fetch_max(raised, 1)  # lower: not written, still refreshed
        await assert_fresh_ttl(bench, spent, added, raised)
        await age(bench, spent, added)
        await store.refund(spent, 1)
        await store.refund_many([Refund(added, 1)])
        await assert_fresh_ttl(bench, spent, added)

    on_redis(scenario)


def test_a_refused_batch_refreshes_the_ttl_of_every_existing_key_and_creates_none(on_redis):
    """Otherwise a session at its cap that keeps retrying has its counter
    expire and its cap silently reset."""
    async def scenario(bench: Bench) -> None:
        capped, fine, absent = bench.key("capped"), bench.key("fine"), bench.key("absent")
        await bench.store.try_spend_many([Spend(capped, 10, 10), Spend(fine, 1, 10)])
        await age(bench, capped, fine)
        outcome = await bench.store.try_spend_many(
            [Spend(fine, 1, 10), Spend(capped, 1, 10), Spend(absent, 1, 10)])
        assert outcome == Refused(1)
        await assert_fresh_ttl(bench, capped, fine)
        assert not await bench.exists(absent)

    on_redis(scenario)


def test_a_refused_add_refreshes_the_counters_ttl(on_redis):
    async def scenario(bench: Bench) -> None:
        key = bench.key("payout")
        await bench.store.add(key, JCS_SAFE_MAX)
        await age(bench, key)
        with pytest.raises(CounterOverflow):
            await bench.store.add(key, 1)
        await assert_fresh_ttl(bench, key)

    on_redis(scenario)


def test_a_refund_clamped_at_zero_gets_a_fresh_ttl(on_redis):
    async def scenario(bench: Bench) -> None:
        one, many = bench.key("one"), bench.key("many")
        await bench.store.add(one, 3)
        await bench.store.add(many, 3)
        await age(bench, one, many)
        await bench.store.refund(one, 10)
        await bench.store.refund_many([Refund(many, 10)])
        assert (await bench.store.get(one), await bench.store.get(many)) == (0, 0)
        await assert_fresh_ttl(bench, one, many)

    on_redis(scenario)


def test_each_refund_leaves_a_five_minute_marker_beside_its_first_key(on_redis):
    async def scenario(bench: Bench) -> None:
        tokens, calls = bench.key("tokens"), bench.key("calls")
        await bench.store.add(tokens, 5)
        await bench.store.refund(tokens, 1)
        await bench.store.refund_many([Refund(calls, 1), Refund(tokens, 1)])
        markers = sorted(await bench.reader.keys(f"{bench.prefix}*:r:*"))
        assert len(markers) == 2
        assert {marker.rsplit(":r:", 1)[0] for marker in markers} == {tokens, calls}
        for marker in markers:
            assert 0 < await bench.reader.ttl(marker) <= REFUND_MARKER_TTL_SECONDS

    on_redis(scenario)


def test_a_replayed_refund_credits_once(on_redis):
    """The same refund sent twice, with the same marker, as a driver re-sends
    one whose reply it lost: the second is a no-op."""
    async def scenario(bench: Bench) -> None:
        one, first, second = bench.key("one"), bench.key("first"), bench.key("second")
        for key in (one, first, second):
            await bench.store.add(key, 10)
        for _ in range(2):
            await bench.store.refund(one, 3)
            await bench.store.refund_many([Refund(first, 3), Refund(second, 4)])
        assert [await bench.store.get(key) for key in (one, first, second)] == [7, 7, 6]
        assert await bench.exists(refund_marker_key(one, "replayed"))

    on_redis(scenario, FixedIdRuntime())


def test_a_redis_store_says_its_counters_expire_in_a_day(on_redis):
    async def scenario(bench: Bench) -> None:
        assert bench.store.counter_ttl_seconds == COUNTER_TTL_SECONDS == 86_400

    on_redis(scenario)


# -- an unreachable server ----------------------------------------------------------


def unreachable_store() -> RedisStateStore:
    data = aioredis.Redis(port=free_port(), decode_responses=True, retry=Retry(NoBackoff(), 0),
                          socket_connect_timeout=1)
    return RedisStateStore(data, AsyncioRuntime())


def test_spend_paths_raise_backend_error_when_the_server_is_unreachable():
    async def scenario() -> None:
        store = unreachable_store()
        calls = [store.try_spend_many([Spend("k", 1, 2)]), store.try_spend(Spend("k", 1, 2)),
                 store.add("k", 1), store.get("k"), store.fetch_max("k", 1)]
        for call in calls:
            with pytest.raises(BackendError):
                await call

    asyncio.run(scenario())


def test_the_empty_batch_is_answered_without_a_round_trip():
    async def scenario() -> None:
        assert await unreachable_store().try_spend_many([]) == Committed(EMPTY_BATCH_REMAINING)

    asyncio.run(scenario())


def test_compensation_and_cleanup_log_a_failure_and_never_raise(caplog):
    async def scenario() -> None:
        store = unreachable_store()
        await store.refund("k", 1)
        await store.refund_many([Refund("k", 1)])
        await store.remove("k")
        await store.remove_prefix("p:")

    with caplog.at_level(logging.WARNING, logger="stores.av_state"):
        asyncio.run(scenario())
    assert [record.message.split(" ", 2)[1] for record in caplog.records] == [
        "refund", "refund_many", "remove", "SCAN"]


def test_a_server_that_is_down_fails_the_start_up():
    async def scenario() -> None:
        with pytest.raises(BackendError, match="did not answer at start-up"):
            await RedisStateStore.connect(unreachable_store().data, AsyncioRuntime())

    asyncio.run(scenario())


# -- the in-memory twin and what the lab reads --------------------------------------


def test_the_in_memory_twin_never_expires_its_counters():
    assert InMemoryStateStore().counter_ttl_seconds is None


def test_read_ledgers_gives_every_counter_the_twin_holds():
    async def scenario() -> None:
        store = InMemoryStateStore()
        await store.try_spend_many([Spend("s:tokens", 5, 10), Spend("s:calls", 1, 3)])
        await store.fetch_max("s:high", 0)
        ledgers = read_ledgers(store)
        assert ledgers == {"s:tokens": 5, "s:calls": 1, "s:high": 0}
        ledgers["s:tokens"] = 0  # a copy: the lab cannot change the store
        assert await store.get("s:tokens") == 5

    asyncio.run(scenario())


def test_decode_reads_a_counter_and_tells_an_absent_one_from_zero():
    assert decode("counter", "42") == 42
    assert decode("counter", "0") == 0
    assert decode("counter", None) is None
    with pytest.raises(ValueError, match="role"):
        decode("holds", "1")


def test_the_kinds_speak_the_counters_protocol_on_their_backends():
    kinds = {kind.name: kind for kind in KINDS}
    assert kinds["av_state.redis"].backends == ("redis",)
    assert kinds["av_state.in_memory"].backends == ("memory",)
    assert {kind.protocol for kind in kinds.values()} == {"counters"}
    assert kinds["av_state.in_memory"].read_ledgers is read_ledgers
    assert kinds["av_state.redis"].ledger_keys(None, "s:tokens") == {"s:tokens": "counter"}


def test_a_pooled_connection_the_server_closed_is_replaced_not_handed_out(redis_url,
                                                                         key_prefix):
    """The seed's r2d2 pool checks a connection (PING) before handing it out:
    after a restart closed every connection, the next spend opens a new one
    instead of failing with "Connection closed by server"."""
    async def scenario() -> None:
        store = await RedisStateStore.from_url(redis_url, AsyncioRuntime())
        admin = aioredis.Redis.from_url(redis_url, decode_responses=True)
        key = f"{key_prefix}:pooled"
        try:
            assert await store.try_spend(Spend(key, 1, 10)) == Committed(9)
            pooled = await store.data.client_id()  # the pool's one idle connection
            assert await admin.client_kill_filter(_id=pooled) == 1
            await asyncio.sleep(0.05)  # the close reaches the client's socket
            assert await store.try_spend(Spend(key, 1, 10)) == Committed(8)
        finally:
            await admin.delete(key)
            await admin.aclose()
            await store.data.aclose()

    asyncio.run(scenario())
