"""Where a service node's transactions run: a service in the lab's process,
or one on a real database driven through its async driver.

The kernel is not an event loop, and a service's calls are coroutines
(``stores.ports.Service``). An in-process service never awaits in the middle
of a transaction, so its coroutine is stepped to its end in place, and one
that does await is a bug that stops the run. A database service really
awaits its driver: its coroutines run on an event loop of their own, in a
thread the backend owns, so the lab drives them the same way inside a plain
script, a test or a notebook (whose own loop is already running).
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Coroutine, Sequence
from typing import Any

from simulator.backends.redis_backend import BackendError, Outcome
from simulator.engine.runtime import EPOCH_MS


def step_to_end(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The result of a coroutine that must finish without awaiting anything."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("an in-process service awaited in the middle of a transaction")


class LoopThread:
    """An event loop in a daemon thread, for a service that awaits a driver."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="service-loop",
                                       daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class ServiceRunner:
    """A ``simulator.net.service.ServiceBackend``: one service, opened for a run."""

    namespace = ""

    def __init__(self, service: Any, loop: LoopThread | None, owned: Any = None) -> None:
        self.service = service
        self.loop = loop
        self.owned = owned
        """A database server the lab started for this run alone, stopped on close."""
        self.recording: list[tuple[str, tuple[Any, ...], int]] | None = None
        """When a list: every transaction executed is appended as ``(verb, args,
        now_ms)``, the service's own call, so a benchmark can replay the same
        transactions straight against a fresh service."""

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Drive one of the service's coroutines to its end (a transaction, or a
        read the family's observer makes)."""
        return step_to_end(coroutine) if self.loop is None else self.loop.run(coroutine)

    def execute(self, verb: str, args: tuple[Any, ...], now_us: int) -> Outcome:
        now_ms = EPOCH_MS + now_us // 1_000
        if self.recording is not None:
            self.recording.append((verb, args, now_ms))
        reply = self.run(self.service.transact(verb, args, now_ms))
        return Outcome.ok(reply, observed=(verb, args, reply))

    def close(self) -> None:
        try:
            self.run(self.service.close())
        finally:
            if self.loop is not None:
                self.loop.close()
            if self.owned is not None:
                self.owned.stop()


def start_throwaway_postgres() -> Any:
    """A PostgreSQL cluster of the lab's own for one run (``--backend postgresql``)."""
    from simulator.backends.local_postgres import ThrowawayPostgres, postgres_binaries

    binaries = postgres_binaries()
    if binaries is None:
        raise BackendError("--backend postgresql starts a throwaway PostgreSQL, but its "
                           "binaries (initdb, postgres) are not installed; install "
                           "PostgreSQL or give postgresql://USER@HOST:PORT/DB")
    return ThrowawayPostgres(binaries)


def open_service_backend(kind: Any, url: str | None, settings: Any,
                         keys: Sequence[Any], throwaway: bool = False) -> ServiceRunner:
    """The service of ``kind`` for one run, provisioned for ``keys``: in the
    lab's process for ``url=None``, else on the database at ``url``; with
    ``throwaway``, on a PostgreSQL the lab starts for the run and stops after."""
    owned = start_throwaway_postgres() if throwaway else None
    if owned is not None:
        url = owned.dsn
    loop = None if url is None else LoopThread()
    # Random, not seeded: it only keeps concurrent runs on one database apart
    # and never reaches a result.
    name = f"lab_run_{secrets.token_hex(6)}"
    try:
        opening = kind.service(url, settings, list(keys), name)
        service = step_to_end(opening) if loop is None else loop.run(opening)
    except Exception as error:
        if loop is not None:
            loop.close()
        if owned is not None:
            owned.stop()
        if url is None:
            raise
        raise BackendError(f"cannot open the service on {url}: "
                           f"{type(error).__name__}: {error}") from None
    return ServiceRunner(service, loop, owned)
