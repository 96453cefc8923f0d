"""A ``Runtime`` whose clock the relay decides: the lease tests' timeouts are
measured against what the relay did, never against how busy the machine is.

The seed's lease tests bound calls by 25-50 ms timeouts. Measured in wall
time against a real server, a loaded two-core machine makes them lucky: a
connect or a script that takes 60 ms is a timeout the scenario never asked
for. Here the clock is virtual. It stands still while anything can still
happen without it -- a request or a connect of the relay's is with the real
server, or a task of the loop is ready to run -- and only once nothing but
the passing of time can move the scenario on does it jump to the next
deadline a timeout, a sleep or a relay delay set. A real server's work
therefore takes no virtual time, and a blackholed request times out after
exactly its timeout.

``Relay.clock`` set to one makes the relay's ``delay_ms`` virtual too.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from stores.asyncio_runtime import AsyncioRuntime

T = TypeVar("T")

BUSY_POLL_S = 0.001
"""How often the clock looks again while the real server is still working."""
IDLE_PASSES = 5
"""Loop passes with nothing ready before the clock believes nothing is."""


class RelayClock(AsyncioRuntime):
    """``Runtime`` over the running loop with a virtual clock (see the module)."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        super().__init__()
        self._now_ms = start_ms
        self._timers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._driver: asyncio.Task[None] | None = None
        self.busy = 0
        """Requests and connects the relay has with the real server now."""

    def now_ms(self) -> int:
        return self._now_ms

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The clock stands still while the test arranges something (a
        connection marked suspect while a request is on its way)."""
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1

    async def within(self, condition: Callable[[], bool], within_ms: int, what: str) -> None:
        """Wait until ``condition()`` holds, failing with ``what`` once
        ``within_ms`` of virtual time have passed (a slow machine passes none)."""
        deadline = self._now_ms + within_ms
        while not condition():
            assert self._now_ms < deadline, what
            await self.sleep_ms(1)

    # -- what the store awaits ---------------------------------------------------

    async def sleep_ms(self, milliseconds: int) -> None:
        await self._until(self._now_ms + max(0, milliseconds))

    async def timeout_ms(self, milliseconds: int, awaitable: Awaitable[T]) -> T:
        task = asyncio.ensure_future(awaitable)
        try:
            return await self._first(task, milliseconds, cancel_on_timeout=True)
        except BaseException:
            task.cancel()
            raise

    async def wait_ms(self, milliseconds: int, task: asyncio.Task[Any]) -> Any:
        # As the asyncio runtime's: the task goes on when the wait ends first.
        return await self._first(task, milliseconds, cancel_on_timeout=False)

    async def _first(self, task: asyncio.Future[T], milliseconds: int,
                     cancel_on_timeout: bool) -> T:
        timer = self._timer(self._now_ms + max(0, milliseconds))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if task.done():
            return task.result()
        if cancel_on_timeout:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        raise TimeoutError(f"no answer within {milliseconds} virtual ms")

    # -- the clock -----------------------------------------------------------------

    def _timer(self, deadline_ms: int) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._timers, (deadline_ms, next(self._order), future))
        if self._driver is None or self._driver.done():
            self._driver = loop.create_task(self._drive())
        return future

    async def _until(self, deadline_ms: int) -> None:
        await self._timer(deadline_ms)

    async def _drive(self) -> None:
        """Move the clock to the next deadline whenever nothing else can happen."""
        loop = asyncio.get_running_loop()
        while self._timers:
            if not await self._quiet(loop):
                await asyncio.sleep(BUSY_POLL_S)
                continue
            deadline, _, future = heapq.heappop(self._timers)
            if future.done():
                continue  # cancelled: its wait ended some other way
            self._now_ms = max(self._now_ms, deadline)
            future.set_result(None)

    async def _quiet(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether only time can move the scenario on: nothing with the real
        server, and nothing ready on the loop for several passes."""
        for _ in range(IDLE_PASSES):
            await asyncio.sleep(0)
            if self.busy or loop._ready:  # noqa: SLF001 - the loop's own run queue
                return False
        return True
