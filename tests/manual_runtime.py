"""A ``Runtime`` for tests whose clock moves only when the test says so.

``now_ms`` starts at 2026-01-01T00:00:00Z and changes only through
``advance_ms`` or ``sleep_ms``, so expiry and idle rules are exercised exactly,
without real sleeping. Ids are a counter (unique and repeatable), ``random``
is a constant, ``timeout_ms`` never fires, and ``spawn`` only records the
coroutine in ``spawned`` for the test to run or close.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class ManualRuntime:
    def __init__(self, now_ms: int = 1_767_225_600_000, id_prefix: str = "manual") -> None:
        # Two stores sharing one server need distinct prefixes, as two real
        # replicas need distinct ids: a collision would merge their holds.
        self._id_prefix = id_prefix
        self._now_ms = now_ms
        self._issued = 0
        self.spawned: list[Coroutine[Any, Any, Any]] = []

    def advance_ms(self, milliseconds: int) -> None:
        self._now_ms += milliseconds

    def now_ms(self) -> int:
        return self._now_ms

    async def sleep_ms(self, milliseconds: int) -> None:
        self.advance_ms(milliseconds)

    async def timeout_ms(self, milliseconds: int, awaitable: Awaitable[T]) -> T:
        return await awaitable

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self.spawned.append(coroutine)

    def new_id(self) -> str:
        self._issued += 1
        return f"{self._id_prefix}-{self._issued}"

    def random(self) -> float:
        return 0.5
