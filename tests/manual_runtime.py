"""A ``Runtime`` for tests whose clock moves only when the test says so.

``now_ms`` starts at 2026-01-01T00:00:00Z and changes only through
``advance_ms`` or ``sleep_ms``, so expiry and idle rules are exercised exactly,
without real sleeping. Ids are a counter (unique and repeatable), ``random``
is a constant, and ``timeout_ms`` never fires.

Background work runs only when asked: ``spawn`` records the coroutine as a
``ManualTask`` in ``spawned`` and returns it, and nothing runs it until the
test does (``ManualTask.run``, ``run_spawned``) or someone waits for it.
``wait_ms`` never times out either (time moves only when the test says so):
it runs the task to its end inside the waiter, if nobody has yet, and hands
back its result or re-raises its exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class ManualTask:
    """A spawned coroutine, run to its end at most once, on demand."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self.coroutine = coroutine
        self.started = False
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    async def run(self) -> Any:
        """Run the coroutine (the first call only), then give its outcome."""
        if not self.started:
            self.started = True
            try:
                self.result = await self.coroutine
            except BaseException as error:  # noqa: BLE001 - kept for every waiter, re-raised
                self.error = error
            finally:
                self.done = True
        if not self.done:
            raise RuntimeError("a ManualTask was awaited again while it was still running")
        if self.error is not None:
            raise self.error
        return self.result


class ManualRuntime:
    def __init__(self, now_ms: int = 1_767_225_600_000, id_prefix: str = "manual") -> None:
        # Two stores sharing one server need distinct prefixes, as two real
        # replicas need distinct ids: a collision would merge their holds.
        self._id_prefix = id_prefix
        self._now_ms = now_ms
        self._issued = 0
        self.spawned: list[ManualTask] = []

    def advance_ms(self, milliseconds: int) -> None:
        self._now_ms += milliseconds

    def now_ms(self) -> int:
        return self._now_ms

    async def sleep_ms(self, milliseconds: int) -> None:
        self.advance_ms(milliseconds)

    async def timeout_ms(self, milliseconds: int, awaitable: Awaitable[T]) -> T:
        return await awaitable

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> ManualTask:
        task = ManualTask(coroutine)
        self.spawned.append(task)
        return task

    async def wait_ms(self, milliseconds: int, task: ManualTask) -> Any:
        return await task.run()

    def cancel(self, task: ManualTask) -> None:
        """A task not yet run never will be; one already run is over."""
        if not task.started:
            task.started = task.done = True
            task.error = asyncio.CancelledError()
            task.coroutine.close()

    async def run_spawned(self) -> None:
        """Run every spawned task nobody has run yet, in spawn order, including
        those they spawn; their failures stay on the tasks (``error``)."""
        index = 0
        while index < len(self.spawned):
            task = self.spawned[index]
            index += 1
            if not task.started:
                try:
                    await task.run()
                except Exception:  # noqa: BLE001, S112 - recorded on the task for the test
                    continue

    def new_id(self) -> str:
        self._issued += 1
        return f"{self._id_prefix}-{self._issued}"

    def random(self) -> float:
        return 0.5
