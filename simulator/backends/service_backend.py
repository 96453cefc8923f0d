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
import concurrent.futures
import logging
import secrets
import threading
from collections.abc import Coroutine, Sequence
from typing import Any

from simulator.backends.redis_backend import BackendError, Outcome
from simulator.backends.run_marks import mark_schema
from simulator.engine.runtime import EPOCH_MS


def step_to_end(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The result of a coroutine that must finish without awaiting anything."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("an in-process service awaited in the middle of a transaction")


def what_happened(error: BaseException) -> str:
    """A failed transaction in words. asyncpg reports a connection the server
    terminated mid-transaction as an internal state error ("cannot switch to
    state 15", MagicStack/asyncpg#784), which names nothing a reader knows."""
    causes = [error]
    while causes[-1].__cause__ is not None and len(causes) < 10:
        causes.append(causes[-1].__cause__)
    if any(type(cause).__name__ in {"InternalClientError", "ConnectionDoesNotExistError"}
           for cause in causes):
        return (f"the server closed the run's connection mid-transaction "
                f"({type(causes[-1]).__name__}: {causes[-1]})")
    return f"{type(error).__name__}: {error}"


DRIVER_LOGGER = "asyncpg"
"""The PostgreSQL driver's logger."""


class LoopThread:
    """An event loop in a daemon thread, for a service that awaits a driver."""

    def __init__(self) -> None:
        # The database driver's pool logs a warning with a traceback for each
        # reconnection it tries once a server is gone, from this thread and
        # at any moment; the lab says that loss itself, in one line.
        logging.getLogger(DRIVER_LOGGER).setLevel(logging.CRITICAL)
        self.loop = asyncio.new_event_loop()
        # Likewise the loop's own report of a transport the server cut: the
        # call that used it fails, and that failure is what the lab reports.
        self.loop.set_exception_handler(lambda loop, context: None)
        self.thread = threading.Thread(target=self.loop.run_forever, name="service-loop",
                                       daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Stop the loop, its tasks cancelled first: a driver's background task
        (a pool keeping its connections up) must not outlive its loop and be
        reported, later, as an exception nobody could catch."""
        try:
            asyncio.run_coroutine_threadsafe(_cancel_others(), self.loop).result(
                timeout=CANCEL_WITHIN_S)
        except Exception:  # noqa: BLE001, S110 - closing regardless: best effort
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


CANCEL_WITHIN_S = 5
"""How long a closing loop waits for its cancelled tasks to end."""


async def _cancel_others() -> None:
    """Cancel every task of the running loop but this one, and wait for them."""
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


class ServiceRunner:
    """A ``simulator.net.service.ServiceBackend``: one service, opened for a run."""

    namespace = ""

    def __init__(self, service: Any, loop: LoopThread | None, owned: Any = None,
                 where: str = "memory", schema: str = "") -> None:
        self.service = service
        self.where = where
        """The database the service runs on (its URL), or ``memory``."""
        self.schema = schema
        """The run's own schema there, named for concurrent runs to keep apart."""
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

    def read(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """``run`` for a read of the lab's own (the observer reading the books),
        or a transaction: one that fails rather than answers (a refusal is an
        answer) means the lab has lost its backend, which ends the run in one
        line."""
        try:
            return self.run(coroutine)
        except Exception as error:
            if self.loop is None:
                raise  # the in-process service: a lab bug, with its traceback
            raise BackendError(f"the lab lost its {self.where} backend: "
                               f"{what_happened(error)}") from error

    @property
    def leftovers(self) -> str:
        """What a run that could not clean up leaves on the database, in words."""
        if self.loop is None or self.owned is not None:
            return ""  # in memory, or on a throwaway server stopped and removed anyway
        return f"its schema {self.schema} stays on {self.where}"

    def execute(self, verb: str, args: tuple[Any, ...], now_us: int) -> Outcome:
        now_ms = EPOCH_MS + now_us // 1_000
        if self.recording is not None:
            self.recording.append((verb, args, now_ms))
        reply = self.read(self.service.transact(verb, args, now_ms))
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


async def _mark(url: str, schema: str) -> None:
    """Mark the run's schema (``run_marks``), if the service made one by that name."""
    import asyncpg
    connection = await asyncpg.connect(url)
    try:
        exists = await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema)
        if exists:
            await mark_schema(connection, schema)
    finally:
        await connection.close()


OPEN_WITHIN_S = 30
"""How long a run told to stop while its service opens waits for the opening,
to close what it opened (its schema) rather than leave it."""


def _close_once_open(opened: concurrent.futures.Future, loop: LoopThread) -> None:
    """Close the service ``opened`` opens, once it has (best effort, bounded):
    a run stopped while opening leaves nothing behind either."""
    try:
        service = opened.result(timeout=OPEN_WITHIN_S)
        loop.run(service.close())
    except Exception:  # noqa: BLE001, S110 - failed to open, or to close: nothing more to do
        pass


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
    opened: concurrent.futures.Future | None = None
    try:
        opening = kind.service(url, settings, list(keys), name)
        if loop is None:
            service = step_to_end(opening)
        else:
            opened = asyncio.run_coroutine_threadsafe(opening, loop.loop)
            service = opened.result()
            if owned is None:
                loop.run(_mark(url, name))  # for clean, should the run be killed
    except BaseException as error:
        if opened is not None and not isinstance(error, Exception):
            _close_once_open(opened, loop)  # told to stop: its schema goes as at any end
        if loop is not None:
            loop.close()
        if owned is not None:
            owned.stop()
        if url is None or not isinstance(error, Exception):
            raise
        raise BackendError(f"cannot open the service on {url}: "
                           f"{what_happened(error)}") from None
    return ServiceRunner(service, loop, owned, where="memory" if url is None else url,
                         schema=name)
