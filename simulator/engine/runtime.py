"""The simulated runtime port: virtual time, kernel processes, seeded ids.

One ``SimRuntime`` per replica incarnation. ``now_ms`` reads the replica's
own clock, which may be offset and drift from true virtual time; sleeps and
timeouts are in true virtual time (a skewed clock misreports the time, it
does not change how long things take).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from simulator.engine.kernel import Kernel, Owner, Process
from simulator.engine.traps import Join, Sleep

T = TypeVar("T")

EPOCH_MS = 1_767_225_600_000
"""Virtual time zero on every replica's clock: 2026-01-01T00:00:00Z."""


@dataclass(frozen=True, slots=True)
class ReplicaClock:
    """A wall clock that is ``offset_us`` off and gains ``drift_ppm`` per million."""

    offset_us: int = 0
    drift_ppm: int = 0

    def now_ms(self, true_us: int) -> int:
        skewed_us = true_us + self.offset_us + true_us * self.drift_ppm // 1_000_000
        return EPOCH_MS + skewed_us // 1_000


async def _awaiting(awaitable: Awaitable[T]) -> T:
    return await awaitable


class SimRuntime:
    """``stores.ports.Runtime`` for one replica incarnation."""

    def __init__(self, kernel: Kernel, owner: Owner, clock: ReplicaClock,
                 ids: random.Random, jitter: random.Random) -> None:
        self.kernel = kernel
        self.owner = owner
        self.clock = clock
        self._ids = ids
        self._jitter = jitter

    def now_ms(self) -> int:
        return self.clock.now_ms(self.kernel.now)

    async def sleep_ms(self, milliseconds: int) -> None:
        await Sleep(milliseconds * 1_000)

    async def timeout_ms(self, milliseconds: int, awaitable: Awaitable[T]) -> T:
        # A coroutine runs as the child itself, so a child closed before it
        # started (its replica crashed first) closes it too, never leaving it
        # unawaited; any other awaitable is awaited by a wrapper.
        guarded = awaitable if isinstance(awaitable, Coroutine) else _awaiting(awaitable)
        child = self.kernel.spawn(guarded, self.owner, "timeout-guarded call")
        try:
            return await Join(child, milliseconds * 1_000)
        except BaseException:
            # Timed out, or this task was itself cancelled: the guarded work
            # is cancelled too, as asyncio.wait_for does.
            self.kernel.cancel(child)
            raise

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> Process:
        return self.kernel.spawn(coroutine, self.owner,
                                 getattr(coroutine, "__qualname__", "task"))

    async def wait_ms(self, milliseconds: int, task: Process) -> Any:
        # A join neither cancels the joined process when it times out nor
        # when the waiter is cancelled: the task runs on, as the port says.
        return await Join(task, milliseconds * 1_000)

    def cancel(self, task: Process) -> None:
        self.kernel.cancel(task)

    def new_id(self) -> str:
        # 128 random bits from this incarnation's own stream: unique across
        # the fleet in practice, and the same on every re-run of the seed.
        return f"{self._ids.getrandbits(128):032x}"

    def random(self) -> float:
        return self._jitter.random()
