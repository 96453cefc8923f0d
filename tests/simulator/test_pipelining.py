"""Pipelined execution changes nothing but speed: the same scenario and seed
give the same trace, summary and metrics with and without it, on fakeredis
and on real Redis, through faults that read, lose and evict the server's state."""

from __future__ import annotations

import pytest

from simulator.run.compose import run_scenario
from simulator.scenario.model import load_scenario

# Busy enough that several commands share a pipeline; faults that force
# flushes at awkward moments (restarts, key expiry, crashes, retries).
BUSY_WITH_FAULTS = {
    "duration": "4s",
    "fleet.replicas": 200,
    "workload.arrivals": "poisson(3000/s)",
    "store_settings.reservation_ttl": "200ms",
    "network.reply_loss": 0.02,
    "network.request_loss": 0.01,
    "network.retries": {"count": 2},
    "faults.crash": {"rate": "120/h", "restart_after": "500ms"},
    "faults.server_restart": {"rate": "30/min", "down_for": "100ms"},
    "server.persistence": "aof-everysec",
}


def run_both_ways(overrides: dict, backend: str | None = None):
    scenario = load_scenario("data/scenarios/demo.toml", overrides)
    alone = run_scenario(scenario, backend=backend, pipelined=False)
    pipelined = run_scenario(scenario, backend=backend, pipelined=True)
    return alone, pipelined


def assert_same_run(alone, pipelined) -> None:
    assert pipelined.summary == alone.summary
    assert pipelined.trace.columns == alone.trace.columns
    assert pipelined.sampler.rows == alone.sampler.rows


def test_pipelining_gives_the_same_run_as_one_command_at_a_time_on_fakeredis():
    alone, pipelined = run_both_ways(BUSY_WITH_FAULTS)
    assert_same_run(alone, pipelined)
    summary = pipelined.summary
    assert summary["fault_server_restart_count"] > 0 and summary["fault_crash_count"] > 0
    assert summary["key_expired_count"] > 0 and summary["duplicate_execution_count"] > 0
    assert alone.run_info["commands_per_pipeline"] == 1
    assert pipelined.run_info["commands_per_pipeline"] > 2


@pytest.mark.redis
def test_pipelining_gives_the_same_run_as_one_command_at_a_time_on_real_redis(redis_url):
    alone, pipelined = run_both_ways(BUSY_WITH_FAULTS | {"duration": "2s"}, backend=redis_url)
    assert_same_run(alone, pipelined)
    assert pipelined.run_info["pipelines_sent"] < alone.run_info["pipelines_sent"]


def test_with_eviction_every_write_is_sent_alone_and_the_run_is_the_same():
    alone, pipelined = run_both_ways({"duration": "2s", "server.maxmemory_keys": 40,
                                      "server.eviction_policy": "allkeys-lru"})
    assert_same_run(alone, pipelined)
    assert pipelined.summary["key_evicted_count"] > 0
    assert pipelined.run_info["commands_per_pipeline"] == 1


def test_scripts_sent_early_are_read_in_order_and_nothing_overtakes_them(backend_url):
    """``submit`` sends without reading; until ``collect``, any other use of the
    backend (which goes through another connection, and so could run before
    the scripts sent) is refused as a lab bug."""
    from simulator.backends import BackendError, BackendSpec, open_redis_backend

    backend = open_redis_backend(BackendSpec.parse(backend_url))
    try:
        key = f"{backend.namespace}early"
        incr = ("return redis.call('INCRBY', KEYS[1], ARGV[1])", (key,))
        backend.submit([(*incr, ("2",), 0, True), (*incr, ("3",), 0, True)])
        backend.submit([(*incr, ("5",), 0, True)])
        with pytest.raises(BackendError, match="in flight"):
            backend.read("GET", key)
        outcomes = backend.collect()
        assert [outcome.value for outcome in outcomes] == [2, 5, 10]
        assert outcomes[-1].observed == ([key, "string", "10"],)
        assert backend.read("GET", key) == "10"
    finally:
        backend.close()


def test_a_backend_closed_with_scripts_in_flight_leaves_nothing_behind(redis_url):
    """A run that stops midway (an error) closes its backend with replies
    unread: the close still removes every key of the run, through a clean
    connection."""
    import redis

    from simulator.backends import BackendSpec, open_redis_backend

    backend = open_redis_backend(BackendSpec.parse(redis_url))
    key = f"{backend.namespace}midway"
    backend.submit([("return redis.call('INCRBY', KEYS[1], 1)", (key,), (), 0, True)] * 3)
    backend.close()
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    assert client.keys(f"{backend.namespace}*") == []
    client.close()


def test_scripts_go_out_byte_for_byte_as_redis_py_packs_them():
    """``submit`` packs its commands with hiredis itself: the server receives
    the bytes redis-py's own packing gives, for every kind of argument the
    lab sends (str, non-ASCII str, int, bytes)."""
    from simulator.backends import BackendSpec, open_redis_backend

    backend = open_redis_backend(BackendSpec.parse("fakeredis"))
    connection = backend._connection
    sent: list[bytes] = []
    send = connection.send_packed_command
    connection.send_packed_command = lambda packed, **options: (sent.extend(packed),
                                                                send(packed, **options))
    try:
        key = f"{backend.namespace}bytes"
        script = "return redis.call('SET', KEYS[1], ARGV[1])"
        batch = [(script, (key,), ("plain", "é ☃", 7, -12, 10**20, b"\x00\xff"), 0, True),
                 (script, (), (), 0, False)]
        backend.submit(batch)
        backend.collect()
        expected = connection.pack_commands(
            [(*backend._calls[script], len(keys), *keys, *args, "", "1" if observe else "0")
             for _, keys, args, _, observe in batch])
        assert b"".join(sent) == b"".join(expected)
    finally:
        backend.close()
