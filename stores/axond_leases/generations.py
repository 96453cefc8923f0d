"""The shared connection and its generations: used while trusted, retired
and replaced when it goes bad.

Every acquire (and every release's first attempt) goes over one shared,
multiplexed connection, replies matched to requests in order. That is fast,
and fragile: when a reply goes missing (an invoke abandoned at its deadline,
a dropped response), every later reply on the connection may land on the
wrong caller. So each connection is a numbered *generation*, and a generation
that may be misaligned is *suspect*: an invoke that outlived its liveness
deadline, or a reply that echoed someone else's lease id, marks it so. A
suspect generation serves no new acquire (they are unavailable until the
replacement lands), its in-flight results are untrusted, and a replacement
(``Connector.connect``, bounded by ``connect_timeout``) becomes the next
generation in the background. One replacement runs at a time; one that
fails is requested again by the next acquire that finds the generation
suspect.

Rules kept here:

* ``suspect_generation`` only grows (axond's ``fetch_max``): a generation
  once suspect stays suspect, and marking an older one is harmless.
* Swapping generations only affects later invokes: one in flight keeps the
  connection it started on and consumes its reply there.
* A retired generation is closed once no invoke is in flight on it. axond
  drops it when the last reference goes; nothing ever sends on a retired
  generation again, so closing it when it falls idle is the same to the
  server, and needs no reference counting of permits.
* Each generation's first suspect mark is kept as a ``Retirement`` (when it
  was opened, when and by what it was marked): nothing here reads it; the lab
  does, to tell a connection that really failed from a healthy one retired.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from redis.exceptions import RedisError

from stores.axond_leases.outcome import InvokeOutcome, result_has_mismatched_lease_id
from stores.axond_leases.slots import Slots
from stores.ports import Connection, Connector, Runtime, Script
from stores.scripts import ScriptSet

# What a call to Redis can fail with, whoever raised it: redis-py's errors, a
# socket error, or a caller-side timeout.
UNREACHABLE = (RedisError, OSError, TimeoutError)

logger = logging.getLogger("stores.axond_leases")


@dataclass(frozen=True, slots=True)
class Retirement:
    """Why a generation stopped being trusted: its first suspect mark.

    Times are the replica's clock in ms. ``invoke`` is what outlived its
    liveness deadline (``acquire`` or ``release``, after ``ran_ms``), or
    ``None`` when an acquire's reply echoed another lease id."""

    generation: int
    opened_ms: int
    at_ms: int
    invoke: str | None = None
    ran_ms: int = 0


class SharedConnection:
    """One generation: the connection, its number, its scripts, its load."""

    __slots__ = ("connection", "generation", "opened_ms", "acquire", "release", "in_flight",
                 "retired", "closed")

    def __init__(self, connection: Connection, generation: int, scripts: ScriptSet,
                 opened_ms: int = 0) -> None:
        self.connection = connection
        self.generation = generation
        self.opened_ms = opened_ms
        """When it became current, on the replica's clock."""
        self.acquire: Script = connection.register_script(scripts.source("acquire"))
        self.release: Script = connection.register_script(scripts.source("release"))
        self.in_flight = 0
        self.retired = False
        self.closed = False

    def __repr__(self) -> str:
        return f"SharedConnection(generation={self.generation}, in_flight={self.in_flight})"


class SharedInvoke:
    """One invoke on a shared generation (a ``with`` block around it).

    Unless ``complete`` is called -- the invoke returned before its deadline,
    with a reply or an error -- leaving the block retires the generation:
    axond's ``SharedInvokeGuard``, whose drop does the same. It also counts the
    invoke as in flight, so a retired generation closes when its last ends.
    ``call`` (``acquire``, ``release``) and how long it ran go in the
    generation's ``Retirement``.
    """

    __slots__ = ("_recovery", "_shared", "_completed", "_call", "_started_ms")

    def __init__(self, recovery: ConnectionRecovery, shared: SharedConnection,
                 call: str) -> None:
        self._recovery = recovery
        self._shared = shared
        self._completed = False
        self._call = call
        self._started_ms = recovery.runtime.now_ms()

    def complete(self) -> None:
        self._completed = True

    def __enter__(self) -> SharedInvoke:
        self._shared.in_flight += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        shared = self._shared
        shared.in_flight -= 1
        if not self._completed:
            ran_ms = self._recovery.runtime.now_ms() - self._started_ms
            self._recovery.mark_suspect(shared.generation, self._call, ran_ms)
        self._recovery.close_if_idle(shared)


class ConnectionRecovery:
    """The current generation, the suspect mark, the shared invoke cap, and
    the replacement: axond's ``RedisRecovery`` with its ``ArcSwap``."""

    def __init__(self, connection: Connection, connector: Connector, runtime: Runtime,
                 scripts: ScriptSet, connect_timeout_ms: int, invoke_concurrency: int) -> None:
        self.connector = connector
        self.runtime = runtime
        self.scripts = scripts
        self.connect_timeout_ms = connect_timeout_ms
        self.current = SharedConnection(connection, 1, scripts, runtime.now_ms())
        self.suspect_generation = 0
        self.retirements: dict[int, Retirement] = {}
        """Each generation's first suspect mark, by generation."""
        self.invoke_slots = Slots(invoke_concurrency)
        """Invokes in flight on the shared connection; taken, never waited for."""
        self._replacing = False
        self._closed = False

    def invoke(self, shared: SharedConnection, call: str = "acquire") -> SharedInvoke:
        return SharedInvoke(self, shared, call)

    def is_untrusted(self, generation: int) -> bool:
        """A result from ``generation`` may be someone else's: the generation
        was replaced since, or is suspect (axond's ``result_is_untrusted``)."""
        return generation != self.current.generation or self.suspect_generation >= generation

    def mark_suspect(self, generation: int, invoke: str | None = None,
                     ran_ms: int = 0) -> None:
        """``generation`` may be misaligned: trust nothing from it, and
        replace the current connection if it is that generation (or older).
        ``invoke`` outlived its deadline after ``ran_ms`` (``None``: a reply
        echoed another lease id, or the generation is marked again)."""
        if generation > self.suspect_generation and generation == self.current.generation:
            self.retirements[generation] = Retirement(
                generation, self.current.opened_ms, self.runtime.now_ms(), invoke, ran_ms)
        self.suspect_generation = max(self.suspect_generation, generation)
        self._request_replacement()

    def mark_if_mismatched(self, generation: int, outcome: InvokeOutcome, lease_id: str) -> bool:
        """Mark ``generation`` suspect if ``outcome`` echoes another lease id;
        whether it did (axond's ``mark_mismatched_result``)."""
        if not result_has_mismatched_lease_id(outcome, lease_id):
            return False
        logger.warning("acquire reply echoed lease %s, expected %s: retiring generation %d",
                       outcome.echoed_lease_id, lease_id, generation)
        self.mark_suspect(generation)
        return True

    def _request_replacement(self) -> None:
        if self._replacing or self._closed or self.suspect_generation < self.current.generation:
            return
        self._replacing = True
        self.runtime.spawn(self._replace())

    async def _replace(self) -> None:
        try:
            connection = await self.runtime.timeout_ms(self.connect_timeout_ms,
                                                       self.connector.connect())
        except UNREACHABLE as error:
            logger.warning("replacing the shared Redis connection failed (%s); "
                           "the next acquire asks again", describe(error))
            return
        finally:
            self._replacing = False
        if self._closed:
            self.runtime.spawn(close_quietly(connection))
            return
        retired = self.current
        self.current = SharedConnection(connection, retired.generation + 1, self.scripts,
                                        self.runtime.now_ms())
        retired.retired = True
        self.close_if_idle(retired)
        logger.info("shared Redis connection replaced: generation %d", self.current.generation)

    def close_if_idle(self, shared: SharedConnection) -> None:
        """Close a retired generation once nothing is in flight on it."""
        if shared.retired and shared.in_flight == 0 and not shared.closed:
            shared.closed = True
            self.runtime.spawn(close_quietly(shared.connection))

    async def aclose(self) -> None:
        """Close the current connection; a replacement landing later is closed
        on arrival, retired ones when their last invoke ends."""
        self._closed = True
        await close_quietly(self.current.connection)


async def close_quietly(connection: Connection) -> None:
    """Close ``connection``; a connection that fails to close is gone anyway."""
    try:
        await connection.aclose()
    except UNREACHABLE as error:
        logger.debug("closing a Redis connection failed: %s", describe(error))


def describe(error: Any) -> str:
    """An error as one log phrase (a bare ``TimeoutError`` says nothing)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
