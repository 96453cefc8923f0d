"""Messages between a replica and the server: loss, timeouts, retries."""

from __future__ import annotations

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from simulator.backends import BackendSpec, open_redis_backend
from simulator.backends.redis_backend import sha1
from simulator.engine.kernel import Kernel
from simulator.engine.streams import Streams
from simulator.engine.trace import Trace
from simulator.net.links import Link, LinkSettings
from simulator.net.redis_port import SimRedis
from simulator.net.server import Server
from simulator.scenario.distributions import parse_distribution

INCREMENT = "return redis.call('INCR', KEYS[1])"


def harness(request_loss=0.0, reply_loss=0.0, retries=0, backend_url="fakeredis"):
    kernel = Kernel(seed=5)
    trace = Trace()
    backend = open_redis_backend(BackendSpec.parse(backend_url))
    server = Server(kernel, backend, trace)
    owner = kernel.new_owner("replica-0.0")
    settings = LinkSettings(latency=parse_distribution("1ms", "duration"),
                            request_loss=request_loss, reply_loss=reply_loss,
                            timeout_us=100_000, retries=retries, backoff_base_us=10_000,
                            backoff_cap_us=1_000_000)
    link = Link(kernel, server, trace, owner, 0, 0, Streams(5).get("link", 0), settings)
    return kernel, trace, backend, owner, SimRedis(link, {})


def call_increment(request_loss=0.0, reply_loss=0.0, retries=0):
    kernel, trace, backend, owner, port = harness(request_loss, reply_loss, retries)
    # Loaded beforehand, so the call under test is the script itself, not the
    # NOSCRIPT round trip that precedes a first use.
    port.link.server.script_cache[sha1(INCREMENT)] = INCREMENT
    key = f"{backend.namespace}counter"
    outcome: dict[str, object] = {}

    async def caller():
        try:
            outcome["reply"] = await port.register_script(INCREMENT)(keys=[key])
        except RedisTimeoutError:
            outcome["timed out at"] = kernel.now

    kernel.spawn(caller(), owner, "caller")
    kernel.run(10_000_000)
    executed = int(backend.read("GET", key) or 0)
    backend.close()
    return outcome, executed, trace.columns["kind"]


def test_a_delivered_call_executes_once_and_answers():
    outcome, executed, kinds = call_increment()
    assert outcome == {"reply": 1}
    assert executed == 1


def test_a_lost_request_never_executes_and_the_caller_times_out():
    outcome, executed, kinds = call_increment(request_loss=1.0)
    assert executed == 0
    assert "timed out at" in outcome
    assert "request_lost" in kinds and "call_timed_out" in kinds


def test_a_lost_reply_executed_but_the_caller_only_sees_a_timeout():
    outcome, executed, kinds = call_increment(reply_loss=1.0)
    # The ambiguity at the heart of most races: it ran, and nobody knows.
    assert executed == 1
    assert "timed out at" in outcome
    assert "reply_lost" in kinds


def test_a_driver_retry_after_a_lost_reply_executes_the_command_again():
    outcome, executed, kinds = call_increment(reply_loss=1.0, retries=2)
    assert executed == 3
    assert kinds.count("call_retried") == 2
    assert "timed out at" in outcome


def test_the_first_eval_of_a_script_loads_it_after_noscript():
    kernel, trace, backend, owner, port = harness()
    key = f"{backend.namespace}counter"

    async def caller():
        await port.register_script(INCREMENT)(keys=[key])

    kernel.spawn(caller(), owner, "caller")
    kernel.run(1_000_000)
    outcomes = [o for k, o in zip(trace.columns["kind"], trace.columns["outcome"],
                                  strict=True) if k == "call_executed"]
    assert outcomes == ["error:NOSCRIPT", outcomes[1], "1"]
    backend.close()


def test_the_labs_own_redis_client_never_retries(redis_url):
    backend = open_redis_backend(BackendSpec.parse(redis_url))
    retry = backend.client.get_connection_kwargs()["retry"]
    assert retry.get_retries() == 0
    backend.close()


def test_a_non_loopback_server_is_refused_unless_allowed():
    with pytest.raises(ValueError, match="not a loopback"):
        open_redis_backend(BackendSpec.parse("redis://192.0.2.1:6379/0"))
