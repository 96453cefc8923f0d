"""Key TTLs set by scripts expire in virtual time, on fakeredis and real Redis."""

from __future__ import annotations

import time

import pytest

from simulator.backends import BackendSpec, open_redis_backend
from simulator.engine.kernel import Kernel
from simulator.engine.streams import Streams
from simulator.engine.trace import Trace
from simulator.engine.traps import Sleep
from simulator.net.links import Link, LinkSettings
from simulator.net.redis_port import SimRedis
from simulator.net.server import Server

MINUTE_US = 60_000_000


@pytest.fixture
def backend(backend_url):
    opened = open_redis_backend(BackendSpec.parse(backend_url))
    yield opened
    opened.close()


def key_of(backend, name: str) -> str:
    return f"{backend.namespace}test:{name}"


def run(backend, body: str, keys: tuple[str, ...], now_us: int, *args: str):
    backend.expire_due(now_us)
    return backend.run_script(body, keys, args, now_us)


def exists(backend, key: str, now_us: int) -> bool:
    backend.expire_due(now_us)
    return backend.read("EXISTS", key) == 1


def test_a_pexpire_deadline_is_kept_in_virtual_time(backend):
    key = key_of(backend, "holds")
    body = "redis.call('SET', KEYS[1], 'x') return redis.call('PEXPIRE', KEYS[1], 600000)"
    assert run(backend, body, (key,), 0).value == 1
    assert exists(backend, key, 10 * MINUTE_US - 1)
    assert not exists(backend, key, 10 * MINUTE_US)


def test_a_set_with_ex_expires_and_a_plain_set_clears_the_ttl(backend):
    key = key_of(backend, "marker")
    run(backend, "return redis.call('SET', KEYS[1], '1', 'NX', 'EX', 60)", (key,), 0)
    assert backend.expiry.deadline_us(key) == MINUTE_US
    # A plain SET drops the TTL, as on Redis: the key now outlives the minute.
    run(backend, "return redis.call('SET', KEYS[1], '2')", (key,), 1_000)
    assert exists(backend, key, 2 * MINUTE_US)


def test_a_set_nx_that_did_not_set_leaves_the_old_deadline(backend):
    key = key_of(backend, "marker")
    set_nx = "return redis.call('SET', KEYS[1], '1', 'NX', 'EX', 60)"
    assert run(backend, set_nx, (key,), 0).value == "OK"
    assert run(backend, set_nx, (key,), 30 * 1_000_000).value is None
    assert backend.expiry.deadline_us(key) == MINUTE_US


def test_a_non_positive_ttl_deletes_the_key_at_once(backend):
    key = key_of(backend, "counter")
    body = "redis.call('INCRBY', KEYS[1], 5) return redis.call('PEXPIRE', KEYS[1], 0)"
    assert run(backend, body, (key,), 0).value == 1
    assert not exists(backend, key, 0)


def test_a_key_recreated_without_a_ttl_loses_its_old_deadline(backend):
    key = key_of(backend, "spent")
    run(backend, "redis.call('INCRBY', KEYS[1], 1) return redis.call('EXPIRE', KEYS[1], 10)",
        (key,), 0)
    run(backend, "redis.call('DEL', KEYS[1]) return redis.call('INCRBY', KEYS[1], 7)", (key,),
        1_000)
    assert exists(backend, key, MINUTE_US)
    assert backend.read("GET", key) == "7"


def test_a_script_error_keeps_earlier_writes_and_their_deadlines(backend):
    key = key_of(backend, "partial")
    body = ("redis.call('SET', KEYS[1], 'written') redis.call('PEXPIRE', KEYS[1], 1000) "
            "return redis.call('INCR', KEYS[1])")
    outcome = run(backend, body, (key,), 0)
    assert outcome.error is not None and "not an integer" in outcome.error
    assert exists(backend, key, 999_999)
    assert not exists(backend, key, 1_000_000)


def test_reading_a_ttl_inside_a_script_is_refused_rather_than_answered_wrong(backend):
    key = key_of(backend, "holds")
    outcome = run(backend, "return redis.call('PTTL', KEYS[1])", (key,), 0)
    assert outcome.error is not None and "virtual time" in outcome.error


def test_a_ten_minute_ttl_expires_at_virtual_minute_ten_in_a_run_of_seconds(backend):
    """End to end: a replica sets a key with a 10-minute TTL through its link,
    and reads it back at 9:59 and at 10:00 of virtual time."""
    kernel = Kernel(seed=1)
    trace = Trace()
    server = Server(kernel, backend, trace)
    owner = kernel.new_owner("replica-0.0")
    settings = LinkSettings(latency=_constant_latency(), request_loss=0.0, reply_loss=0.0,
                            timeout_us=1_000_000, retries=0, backoff_base_us=0,
                            backoff_cap_us=0)
    link = Link(kernel, server, trace, owner, 0, 0, Streams(1).get("link"), settings)
    port = SimRedis(link, {})
    key = key_of(backend, "ten-minutes")
    seen: dict[str, object] = {}

    async def replica():
        await port.set(key, "held", px=10 * MINUTE_US // 1_000)
        await Sleep(10 * MINUTE_US - kernel.now - 1_000_000)
        seen["at 9:59"] = await port.get(key)
        await Sleep(10 * MINUTE_US - kernel.now)
        seen["at 10:00"] = await port.get(key)

    started = time.perf_counter()
    kernel.spawn(replica(), owner, "replica")
    kernel.run(11 * MINUTE_US)
    assert seen == {"at 9:59": "held", "at 10:00": None}
    assert time.perf_counter() - started < 60  # virtual minutes, not wall minutes
    assert "key_expired" in trace.columns["kind"]


def _constant_latency():
    from simulator.scenario.distributions import parse_distribution

    return parse_distribution("0ms", "duration")


def test_a_write_that_fails_mid_script_leaves_its_key_reported_as_only_read(backend):
    # Redis keeps the writes made before a failing command, and the failing
    # command itself writes nothing: the lab must see a batch stop part-way.
    done, refused = key_of(backend, "done"), key_of(backend, "refused")
    run(backend, "redis.call('SET', KEYS[1], 10) return redis.call('SET', KEYS[2], 10)",
        (done, refused), 0)
    body = ("redis.call('DECRBY', KEYS[1], 4) "
            "return redis.call('DECRBY', KEYS[2], '9.2233720368548e+18')")
    backend.expire_due(1_000)
    outcome = backend.run_script(body, (done, refused), (), 1_000, observe=True)
    assert outcome.error is not None and "not an integer" in outcome.error
    assert [list(entry) for entry in outcome.observed] == [[done, "string", "6"],
                                                           [refused, "same"]]
    assert backend.read("GET", refused) == "10"
