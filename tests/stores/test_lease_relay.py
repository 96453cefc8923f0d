"""The lease tests' relay: a ``Connector`` between the limiter and a real server.

axond's tests put a TCP relay or a stub server between the limiter and Redis
to stall, drop, delay or cut traffic. Here one small relay does all of it at
the level of the ports: it wraps a real ``Connector`` (fakeredis or the
throwaway ``redis-server``), every connection it hands out wraps one real
connection, and every command still executes on the real server. Each relay
connection behaves like a multiplexed one, which is what the limiter must
survive: requests go to the server one at a time in the order sent, and
replies are handed to the waiting callers strictly in order (FIFO). A caller
that stops waiting keeps its place in that queue, so when a reply goes
missing every later reply lands on the caller before its own.

What it can do (``Mode`` applies to every connection, the rest as named):

* ``FORWARD`` -- pass everything through;
* ``BLACKHOLE`` -- requests never reach the server and nothing comes back;
* ``STALL`` -- requests execute, their replies are lost;
* ``CUT`` -- open connections are reset (waiters fail with
  ``ConnectionError``, their queue is gone) and every call or connect fails
  with ``ConnectionError`` until the mode changes, when the connections work
  again, as a client that reconnects does;
* ``delay_ms[kind]`` -- the server takes that long before executing a
  request of ``kind`` (``"acquire"``, ``"release"``, ``"ping"``...), holding up
  the requests behind it on that connection;
* ``RelayConnection.drop_next_reply`` -- lose one reply: the replies behind
  it shift onto the wrong callers;
* ``RelayConnection.blackholed`` -- kinds of request that never reach the
  server on that connection;
* ``hang_ping`` -- ``PING`` is never answered, so ``connect`` hangs;
* counts: ``connections`` (every connection attempt that got through),
  ``sent`` (requests callers sent, by kind and connection number) and
  ``reached`` (the connection numbers each kind of request reached the
  server on, in order; ``count(kind)`` is how many).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections import Counter, defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from relay_clock import RelayClock

from stores.axond_leases import SCRIPTS
from stores.axond_leases.settings import LeaseSettings
from stores.redis_connector import RedisConnector
from stores.scripts import ScriptSet

WATCHDOG_S = 15
"""No lease test may hang the suite: each scenario is cut off after this."""


def run(scenario: Coroutine[Any, Any, Any]) -> Any:
    """Run one test scenario on a fresh event loop, with the watchdog, then
    end the background work it left (releases, replacements) before the loop
    closes: including what that work starts as it is cancelled, which
    ``asyncio.run`` alone would leave pending."""
    async def main() -> Any:
        try:
            return await asyncio.wait_for(scenario, WATCHDOG_S)
        finally:
            await cancel_background_tasks()

    return asyncio.run(main())


async def cancel_background_tasks() -> None:
    this = asyncio.current_task()
    while pending := [task for task in asyncio.all_tasks() if task is not this]:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def backend_connector(backend_name: str, request: pytest.FixtureRequest) -> RedisConnector:
    """Connections to the parametrised backend: a fresh ``FakeServer``, or
    the session's throwaway ``redis-server``."""
    if backend_name == "fakeredis":
        server = fakeredis.FakeServer()
        return RedisConnector(lambda: fakeredis.aioredis.FakeRedis(server=server,
                                                                    decode_responses=True))
    return RedisConnector.from_url(request.getfixturevalue("redis_url"))


def lease_settings(key_prefix: str, **fields: Any) -> LeaseSettings:
    """The seed's test limiter: one lease in flight, a 5 s TTL, fail-closed,
    50 ms timeouts; ``fields`` (by their scenario names) change some."""
    values: dict[str, Any] = {"key_prefix": key_prefix, "max_in_flight": 1,
                              "lease_ttl": "5s", "timeout": "50ms",
                              "connect_timeout": "50ms", **fields}
    return LeaseSettings(**values)


async def eventually(condition: Callable[[], bool], within_s: float, what: str) -> None:
    """Wait until ``condition()`` holds, failing with ``what`` after ``within_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not condition():
        assert loop.time() < deadline, what
        await asyncio.sleep(0.005)


class Mode(enum.Enum):
    FORWARD = "forward"
    BLACKHOLE = "blackhole"
    STALL = "stall"
    CUT = "cut"


@dataclass(frozen=True)
class Request:
    kind: str
    execute: Callable[[], Awaitable[Any]]
    epoch: int


class RelayScript:
    """A script registered through a relay connection; its calls are relayed."""

    def __init__(self, connection: RelayConnection, source: str) -> None:
        self.connection = connection
        self.kind = connection.relay.script_kinds.get(source, "script")
        self.inner = connection.inner.register_script(source)

    async def __call__(self, keys: Sequence[str] = (), args: Sequence[Any] = ()) -> Any:
        return await self.connection.call(
            self.kind, lambda: self.inner(keys=list(keys), args=list(args)))


class RelayConnection:
    """One relayed connection (``stores.ports.Connection``)."""

    def __init__(self, relay: Relay, number: int, inner: Any) -> None:
        self.relay = relay
        self.number = number
        self.inner = inner
        self.blackholed: set[str] = set()
        self.closed = False
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._requests: asyncio.Queue[Request] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._epoch = 0
        self._replies_to_drop = 0

    def drop_next_reply(self) -> None:
        self._replies_to_drop += 1

    def register_script(self, script: str) -> RelayScript:
        return RelayScript(self, script)

    async def ping(self) -> bool:
        return await self.call("ping", self.inner.ping)

    async def get(self, name: str) -> Any:
        return await self.call("get", lambda: self.inner.get(name))

    async def set(self, name: str, value: Any) -> Any:
        return await self.call("set", lambda: self.inner.set(name, value))

    async def delete(self, *names: str) -> int:
        return await self.call("delete", lambda: self.inner.delete(*names))

    async def hdel(self, name: str, *keys: str) -> int:
        return await self.call("hdel", lambda: self.inner.hdel(name, *keys))

    async def incrby(self, name: str, amount: int = 1) -> int:
        return await self.call("incrby", lambda: self.inner.incrby(name, amount))

    async def scan(self, cursor: int = 0, match: str | None = None,
                   count: int | None = None) -> Any:
        return await self.call("scan", lambda: self.inner.scan(cursor, match=match, count=count))

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.reset("connection closed")
        if self._worker is not None:
            self._worker.cancel()
        await self.inner.aclose()

    async def call(self, kind: str, execute: Callable[[], Awaitable[Any]]) -> Any:
        if self.closed:
            raise RedisConnectionError("connection closed")
        if self.relay.mode is Mode.CUT:
            raise RedisConnectionError("connection reset by the relay")
        self.relay.sent[kind, self.number] += 1
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._requests.put_nowait(Request(kind, execute, self._epoch))
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._serve())
        # A caller that stops waiting cancels its waiter, which keeps its
        # place in the queue: the reply meant for it is consumed by it.
        return await waiter

    def reset(self, why: str) -> None:
        """Lose everything in flight: waiters fail, queued requests are dropped."""
        self._epoch += 1
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(RedisConnectionError(why))

    async def _serve(self) -> None:
        relay = self.relay
        while True:
            request = await self._requests.get()
            if request.epoch != self._epoch:
                continue
            if (relay.mode is Mode.BLACKHOLE or request.kind in self.blackholed
                    or (request.kind == "ping" and relay.hang_ping)):
                continue
            relay.reached[request.kind].append(self.number)
            delay_ms = relay.delay_ms.get(request.kind, 0)
            if delay_ms:
                await relay.sleep_ms(delay_ms)
            try:
                async with relay.with_server():
                    reply, error = await request.execute(), None
            except Exception as failure:  # noqa: BLE001 - the server's error is the reply
                reply, error = None, failure
            if request.epoch != self._epoch or relay.mode is Mode.STALL:
                continue
            if self._replies_to_drop:
                self._replies_to_drop -= 1
                continue
            self._deliver(reply, error)

    def _deliver(self, reply: Any, error: BaseException | None) -> None:
        if not self._waiters:
            return
        waiter = self._waiters.popleft()
        if waiter.done():
            return  # its caller stopped waiting: the reply is consumed all the same
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(reply)


class Relay:
    """A ``stores.ports.Connector`` relaying to ``target``'s connections."""

    def __init__(self, target: Any, scripts: ScriptSet = SCRIPTS,
                 clock: RelayClock | None = None) -> None:
        self.target = target
        self.clock = clock
        """With a clock, the relay's delays are virtual, and the clock stands
        still while the real server works (``relay_clock``)."""
        self.script_kinds = {scripts.source(name): name for name in scripts}
        self.mode = Mode.FORWARD
        self.hang_ping = False
        self.delay_ms: dict[str, int] = {}
        self.connections: list[RelayConnection] = []
        self.sent: Counter[tuple[str, int]] = Counter()
        self.reached: defaultdict[str, list[int]] = defaultdict(list)
        self.closed = False

    def set_mode(self, mode: Mode) -> None:
        self.mode = mode
        if mode is Mode.CUT:
            for connection in self.connections:
                connection.reset("connection reset by the relay")

    async def sleep_ms(self, milliseconds: int) -> None:
        if self.clock is None:
            await asyncio.sleep(milliseconds / 1000)
        else:
            await self.clock.sleep_ms(milliseconds)

    @contextlib.asynccontextmanager
    async def with_server(self) -> AsyncIterator[None]:
        """While the real server has a request or a connect of the relay's:
        a clock does not move meanwhile."""
        if self.clock is not None:
            self.clock.busy += 1
        try:
            yield
        finally:
            if self.clock is not None:
                self.clock.busy -= 1

    def count(self, kind: str) -> int:
        """Requests of ``kind`` that reached the server."""
        return len(self.reached[kind])

    def sent_on(self, kind: str, number: int) -> int:
        return self.sent[kind, number]

    async def connect(self) -> RelayConnection:
        if self.closed or self.mode is Mode.CUT:
            raise RedisConnectionError("connection refused by the relay")
        async with self.with_server():
            inner = await self.target.connect()
        if self.closed:  # closed while the server answered: nobody will close it later
            await inner.aclose()
            raise RedisConnectionError("connection refused by the relay")
        connection = RelayConnection(self, len(self.connections) + 1, inner)
        self.connections.append(connection)
        try:
            await connection.ping()
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def aclose(self) -> None:
        self.closed = True
        for connection in self.connections:
            await connection.aclose()


def test_the_production_connector_closes_a_connection_whose_waiter_was_dropped(redis_url,
                                                                                key_prefix):
    """What redis-py (the production ``RedisConnector``) does with a dropped
    waiter: a caller cancelled while its reply is on the way makes it close
    the connection, so the next caller gets its own reply on a new one --
    never the abandoned one's. The command itself may still have run."""
    async def scenario() -> None:
        connection = await RedisConnector.from_url(redis_url).connect()
        blocked, counter = f"{key_prefix}:blocked", f"{key_prefix}:counter"
        try:
            before = await connection.client_id()
            with pytest.raises(TimeoutError):  # its reply would come in 1 s
                await asyncio.wait_for(connection.blpop([blocked], timeout=1), 0.05)
            assert await connection.incrby(counter, 222) == 222, "a reply went astray"
            assert await connection.client_id() != before, "the connection was not replaced"
        finally:
            await connection.delete(counter)
            await connection.aclose()

    run(scenario())


def test_dropped_waiter_misaligns_following_shared_response(backend_name, request, key_prefix):
    """The seed's alignment stub never answers the first command and answers
    the next ones 111, 222, 333; here the relay loses the first reply and
    the real server answers ``INCRBY`` with the amounts. The second caller
    then receives the third command's reply: why the limiter echoes lease ids.
    This is the lab's model of a multiplexed connection that loses a waiter's
    place (the seed's connection manager, a proxy); redis-py, the port's own
    connector, closes the connection instead (the test above), so the lab
    keeps the harder case the seed's store must survive."""
    relay = Relay(backend_connector(backend_name, request))

    async def scenario() -> None:
        try:
            connection = await relay.connect()
            connection.drop_next_reply()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(connection.incrby(f"{key_prefix}:first", 1), 0.05)

            second = asyncio.create_task(connection.incrby(f"{key_prefix}:second", 111))
            await eventually(lambda: relay.sent_on("incrby", 1) >= 2, 1,
                             "second command did not reach the relay")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(connection.incrby(f"{key_prefix}:third", 222), 0.2)
            assert await second == 222, "second waiter did not receive the third request's reply"
        finally:
            await relay.aclose()

    run(scenario())


def test_a_connector_opens_a_new_connection_that_has_answered_a_ping(backend_name, request,
                                                                      key_prefix):
    """``RedisConnector.connect``: each call is a connection of its own, ready to use."""
    connector = backend_connector(backend_name, request)

    async def scenario() -> None:
        first, second = await connector.connect(), await connector.connect()
        try:
            assert first is not second
            assert await first.incrby(f"{key_prefix}:n", 1) == 1
            assert await second.incrby(f"{key_prefix}:n", 1) == 2
            await first.delete(f"{key_prefix}:n")
        finally:
            await first.aclose()
            await second.aclose()

    run(scenario())
