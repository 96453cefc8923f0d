"""Connections as they really behave: a multiplexed connection matches replies
to callers in order, so a lost reply or a dropped waiter hands later callers
the wrong replies; stalls, resets and slow replies; opening a connection is a
round trip; the pooled link keeps each reply with its own caller."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from simulator.backends import BackendSpec, open_redis_backend
from simulator.engine.kernel import Kernel
from simulator.engine.streams import Streams
from simulator.engine.trace import Trace
from simulator.engine.traps import Sleep
from simulator.net.connections import MultiplexedConnection
from simulator.net.links import CONNECTION_FAULTS, FaultClock, Link, LinkSettings, ReplicaNetwork
from simulator.net.redis_port import SimRedis
from simulator.net.server import Server
from simulator.scenario.distributions import parse_distribution


class Bench:
    """One replica with one connection to a fakeredis-backed server."""

    def __init__(self, multiplexed: bool = True, reply_loss: float = 0.0,
                 timeout_us: int = 100_000) -> None:
        self.kernel = Kernel(seed=3)
        self.trace = Trace()
        self.backend = open_redis_backend(BackendSpec.parse("fakeredis"))
        self.server = Server(self.kernel, self.backend, self.trace)
        self.owner = self.kernel.new_owner("replica-0.0")
        self.network = ReplicaNetwork()
        self.faults = FaultClock()
        self.hits: list[tuple[int, str]] = []
        self.faults.listener = lambda tag, what, call: self.hits.append((tag, what))
        self.settings = LinkSettings(
            latency=parse_distribution("1ms", "duration"), request_loss=0.0,
            reply_loss=reply_loss, timeout_us=timeout_us, retries=0, backoff_base_us=10_000,
            backoff_cap_us=1_000_000, multiplexed=multiplexed)
        self.streams = Streams(3)
        link_class = MultiplexedConnection if multiplexed else Link
        self.port = SimRedis(self._link(link_class, "link"), {}, self._open)
        self.results: dict[str, object] = {}

    def _link(self, link_class: type[Link], *stream: object) -> Link:
        return link_class(self.kernel, self.server, self.trace, self.owner, 0, 0,
                          self.streams.get(*stream), self.settings, self.network, self.faults)

    def _open(self) -> MultiplexedConnection:
        self.network.connections_opened += 1
        return self._link(MultiplexedConnection, "link", "connection",
                          self.network.connections_opened)

    def key(self, name: str) -> str:
        return f"{self.backend.namespace}{name}"

    def arm(self, fault: str, count: int = 1, extra_us: int = 0, call: str | None = None):
        self.network.forced.append([CONNECTION_FAULTS.get(fault, fault), call, count, extra_us])

    def incr_at(self, name: str, at_us: int, tag: int, port: SimRedis | None = None,
                amount: int = 1) -> None:
        """A caller (request ``tag``) that adds ``amount`` to key ``name`` at ``at_us``."""

        async def caller():
            await Sleep(at_us)
            try:
                self.results[name] = await (port or self.port).incrby(self.key(name), amount)
            except (RedisTimeoutError, RedisConnectionError) as error:
                self.results[name] = type(error).__name__

        self.kernel.spawn(caller(), self.owner, f"caller {name}", tag=tag)

    def run(self) -> dict[str, object]:
        self.kernel.run(5_000_000)
        return self.results

    def value(self, name: str) -> int:
        return int(self.backend.read("GET", self.key(name)) or 0)

    def close(self) -> None:
        self.backend.close()


@pytest.fixture
def bench():
    made: list[Bench] = []

    def make(**kwargs) -> Bench:
        made.append(Bench(**kwargs))
        return made[-1]

    yield make
    for item in made:
        item.close()


def test_callers_on_one_multiplexed_connection_get_their_own_replies(bench):
    lab = bench()
    for number, name in enumerate(("a", "b", "c")):
        lab.incr_at(name, number * 10, number, amount=number + 5)
    assert lab.run() == {"a": 5, "b": 6, "c": 7}
    assert "misaligned_reply" not in lab.trace.columns["kind"]


def test_a_lost_reply_on_a_shared_connection_shifts_every_later_reply():
    """The seed's alignment stub, on the lab's connection model: the first
    reply never reaches the driver, so the second caller receives the third
    command's reply and the third caller none."""
    lab = Bench(timeout_us=10_000)
    try:
        lab.network.forced.append(["reply", None, 1, 0])
        lab.incr_at("first", 0, 1, amount=111)
        lab.incr_at("second", 20_000, 2, amount=222)  # after the first caller timed out
        lab.incr_at("third", 21_000, 3, amount=333)
        results = lab.run()
        assert [lab.value(name) for name in ("first", "second", "third")] == [111, 222, 333]
        # The first caller's place takes the second reply; the second caller
        # reads the third's.
        assert results == {"first": "TimeoutError", "second": 333, "third": "TimeoutError"}
        assert (2, "misaligned_reply") in lab.hits
    finally:
        lab.close()


def test_a_dropped_waiter_hands_the_next_caller_the_previous_callers_reply(bench):
    lab = bench()
    lab.arm("dropped_waiter")
    lab.incr_at("x", 0, 1, amount=100)    # its waiter is dropped: it times out
    lab.incr_at("y", 100, 2, amount=200)  # receives x's reply
    lab.incr_at("z", 200, 3, amount=300)  # receives y's
    results = lab.run()
    assert [lab.value(name) for name in "xyz"] == [100, 200, 300]
    assert results == {"x": "TimeoutError", "y": 100, "z": 200}
    assert (1, "waiter_dropped") in lab.hits
    assert (2, "misaligned_reply") in lab.hits and (3, "misaligned_reply") in lab.hits


def test_a_caller_that_stops_waiting_keeps_its_place_so_replies_stay_aligned(bench):
    lab = bench(timeout_us=5_000)
    lab.arm("slow_reply", extra_us=20_000)
    lab.incr_at("slow", 0, 1)
    lab.incr_at("next", 30_000, 2)
    results = lab.run()
    assert results == {"slow": "TimeoutError", "next": 1}
    assert (1, "slow_reply") in lab.hits
    assert "misaligned_reply" not in lab.trace.columns["kind"]


def test_a_slow_reply_holds_up_the_replies_behind_it_on_the_same_connection(bench):
    lab = bench()
    lab.arm("slow_reply", extra_us=50_000)
    lab.incr_at("slow", 0, 1)
    lab.incr_at("fast", 100, 2)
    arrivals = {}

    async def watch():
        while len(lab.results) < 2:
            await Sleep(1_000)
            for name in lab.results:
                arrivals.setdefault(name, lab.kernel.now)

    lab.kernel.spawn(watch(), lab.owner, "watch")
    lab.run()
    assert arrivals["fast"] >= arrivals["slow"] >= 50_000


def test_a_stalled_connection_executes_but_never_answers_again(bench):
    lab = bench()
    lab.arm("connection_stall")
    lab.incr_at("a", 0, 1)
    lab.incr_at("b", 1_000, 2)
    results = lab.run()
    assert results == {"a": "TimeoutError", "b": "TimeoutError"}
    assert lab.value("a") == 1 and lab.value("b") == 1
    assert {(1, "connection_stalled"), (2, "connection_stalled")} <= set(lab.hits)


def test_a_reset_fails_every_waiter_and_the_next_call_goes_out_on_a_fresh_stream(bench):
    lab = bench()
    lab.arm("connection_reset")
    lab.incr_at("a", 0, 1)
    lab.incr_at("b", 100, 2)   # waiting when a's reset comes
    lab.incr_at("c", 50_000, 3)
    results = lab.run()
    assert results == {"a": "ConnectionError", "b": "ConnectionError", "c": 1}
    assert lab.value("a") == 1  # the reset came after it executed
    assert (2, "connection_reset") in lab.hits


def test_opening_a_connection_is_a_round_trip_and_a_hang_fails_the_connect(bench):
    lab = bench()
    opened: dict[str, object] = {}

    async def connect(name: str):
        try:
            connection = await lab.port.connect()
            opened[name] = lab.kernel.now
            lab.results[name] = await connection.incrby(lab.key(name))
        except (RedisTimeoutError, RedisConnectionError) as error:
            opened[name] = type(error).__name__

    lab.kernel.spawn(connect("fresh"), lab.owner, "connect", tag=1)
    lab.run()
    assert opened["fresh"] == 2_000  # PING there and back at 1 ms each way
    assert lab.results["fresh"] == 1
    lab.arm("connection_stall", call="PING")
    lab.kernel.spawn(connect("hung"), lab.owner, "connect", tag=2)
    lab.kernel.run(10_000_000)
    assert opened["hung"] == "TimeoutError"
    assert (2, "connect_failed") in lab.hits


def test_each_connection_has_its_own_queue(bench):
    lab = bench()
    other: dict[str, SimRedis] = {}

    async def open_other():
        other["port"] = await lab.port.connect()

    lab.kernel.spawn(open_other(), lab.owner, "open")
    lab.kernel.run(10_000)
    lab.arm("dropped_waiter", call="INCRBY")
    lab.incr_at("mine", 0, 1)                     # dropped on the shared connection
    lab.incr_at("theirs", 100, 2, other["port"])  # on its own connection: unaffected
    results = lab.run()
    assert results == {"mine": "TimeoutError", "theirs": 1}


def test_a_pooled_link_keeps_each_reply_with_its_caller_under_the_same_faults(bench):
    lab = bench(multiplexed=False)
    lab.arm("dropped_waiter")
    lab.incr_at("x", 0, 1)
    lab.incr_at("y", 100, 2)
    results = lab.run()
    assert results == {"x": "TimeoutError", "y": 1}
    assert "misaligned_reply" not in lab.trace.columns["kind"]


def test_a_closed_connection_refuses_later_calls(bench):
    lab = bench()

    async def close_then_call():
        await lab.port.aclose()
        try:
            await lab.port.incrby(lab.key("late"))
        except RedisConnectionError as error:
            lab.results["late"] = str(error)

    lab.kernel.spawn(close_then_call(), lab.owner, "closer")
    assert "closed" in str(lab.run()["late"])
