"""The two ports every store is written against, and nothing else.

Rules kept here:

* A store awaits only these ports. It never imports ``asyncio``, ``time``,
  ``uuid``, ``random`` or the simulator, so one class serves a real gateway
  (asyncio, the wall clock, a ``redis.asyncio.Redis``), the contract tests and
  the simulator (virtual time, a replica's skewed clock, seeded ids).
* The data port of a Redis store is the subset of ``redis.asyncio.Redis`` it
  uses, with ``decode_responses=True``: replies are ``str``/``int``/lists.
  Failures surface as redis-py's own exceptions (``ConnectionError``,
  ``TimeoutError``, ``NoScriptError``...), whoever raises them.
* The runtime port owns time and identity. ``now_ms`` is *this replica's*
  wall clock in milliseconds (scripts compare deadlines against it, so it must
  be an absolute time every replica roughly agrees on, not a monotonic one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Script(Protocol):
    """A registered Lua script: ``await script(keys=[...], args=[...])``.

    Runs ``EVALSHA`` and, when the server has lost its script cache, loads the
    source and tries once more (what redis-py's ``AsyncScript`` does).
    """

    async def __call__(
        self, keys: Sequence[str] = (), args: Sequence[Any] = ()
    ) -> Any: ...


class RedisPort(Protocol):
    """The ``redis.asyncio.Redis`` subset the Redis stores use."""

    def register_script(self, script: str) -> Script: ...

    async def ping(self) -> bool: ...

    async def get(self, name: str) -> str | None: ...

    async def set(self, name: str, value: Any) -> Any: ...

    async def delete(self, *names: str) -> int: ...

    async def hdel(self, name: str, *keys: str) -> int: ...

    async def incrby(self, name: str, amount: int = 1) -> int: ...

    async def scan(
        self, cursor: int = 0, match: str | None = None, count: int | None = None
    ) -> tuple[int, list[str]]: ...


class Connection(RedisPort, Protocol):
    """A ``RedisPort`` that is one connection to the server: its commands
    share one link, replies matched to requests in order."""

    async def aclose(self) -> None:
        """Close the connection; commands in flight on it fail."""
        ...


class Connector(Protocol):
    """Opens connections to one server, for a store that manages its own (a
    shared connection replaced when it goes bad, fresh ones for retries)."""

    async def connect(self) -> Connection:
        """A NEW connection, which has answered one ``PING`` (a round trip).
        May raise redis-py's ``ConnectionError`` / ``TimeoutError``, or hang:
        callers bound it with ``Runtime.timeout_ms``."""
        ...


class Runtime(Protocol):
    """Time, concurrency and identity, as seen by one replica."""

    def now_ms(self) -> int:
        """This replica's wall clock, in integer milliseconds since the epoch."""
        ...

    async def sleep_ms(self, milliseconds: int) -> None:
        """Suspend this task for ``milliseconds`` of this runtime's time."""
        ...

    async def timeout_ms(self, milliseconds: int, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``; past the deadline cancel it and raise ``TimeoutError``."""
        ...

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coroutine`` in the background (e.g. a release retry); returns
        its task, a handle ``wait_ms`` accepts (an ``asyncio.Task`` in
        production, the kernel's ``Process`` in the simulator)."""
        ...

    async def wait_ms(self, milliseconds: int, task: Any) -> Any:
        """Wait for a task ``spawn`` returned: its result (or its exception,
        re-raised), or ``TimeoutError`` once ``milliseconds`` pass. Unlike
        ``timeout_ms`` the task runs on either way: neither the timeout nor
        cancelling the waiter cancels it (a caller that stops waiting for an
        invoke it does not own)."""
        ...

    def cancel(self, task: Any) -> None:
        """Cancel a task ``spawn`` returned, at the await it stands at (it sees
        ``CancelledError`` there). The shipped stores never do: a variant that
        drops work its fixed store lets run on does."""
        ...

    def new_id(self) -> str:
        """An identifier unique across the whole fleet, for reservations and leases."""
        ...

    def random(self) -> float:
        """A float in [0, 1), for jitter."""
        ...


class ServicePort(Protocol):
    """The data port of a store kept by a service (a ledger on a database):
    each call is one transaction, named by ``verb``, sent to the service and
    answered by its reply. A refusal comes back as the reply and the store's
    client raises it; a transport failure surfaces as redis-py's
    ``ConnectionError`` / ``TimeoutError``, whoever raises them, and leaves
    the caller unsure whether the transaction committed."""

    async def call(self, verb: str, *args: Any) -> Any: ...


class Service(Protocol):
    """What a service node runs: one transaction per call, to its commit or
    refusal, at the node's clock ``now_ms``. A refusal is returned (the
    exception instance itself), never raised; a raised error is a failure of
    the service itself, which stops the run."""

    async def transact(self, verb: str, args: tuple[Any, ...], now_ms: int) -> Any: ...

    async def close(self) -> None:
        """Release what the service holds (a database schema the lab made)."""
        ...

