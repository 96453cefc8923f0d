"""The production runtime: asyncio, the wall clock and the OS's randomness.

The only module under ``stores/`` allowed to touch ``asyncio``, ``time`` and
``secrets``; stores themselves reach them through the ``Runtime`` port, so a
gateway can use a store without the simulator installed.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class AsyncioRuntime:
    """``Runtime`` over the running asyncio loop and the system clock."""

    def __init__(self) -> None:
        # Background tasks are kept referenced until done: asyncio holds only
        # weak references, and a collected task silently stops.
        self._background: set[asyncio.Task[Any]] = set()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_ms(self, milliseconds: int) -> None:
        await asyncio.sleep(milliseconds / 1000)

    async def timeout_ms(self, milliseconds: int, awaitable: Awaitable[T]) -> T:
        return await asyncio.wait_for(awaitable, milliseconds / 1000)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def wait_ms(self, milliseconds: int, task: asyncio.Task[Any]) -> Any:
        # The shield is what keeps the task running when the wait times out
        # or the waiter is cancelled; it also marks a failure the waiter no
        # longer hears as retrieved, so asyncio does not report it.
        return await asyncio.wait_for(asyncio.shield(task), milliseconds / 1000)

    def cancel(self, task: asyncio.Task[Any]) -> None:
        task.cancel()

    def new_id(self) -> str:
        return secrets.token_hex(16)

    def random(self) -> float:
        return secrets.randbelow(1 << 53) / (1 << 53)
