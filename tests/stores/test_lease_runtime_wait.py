"""``Runtime.spawn`` hands back a task and ``Runtime.wait_ms`` waits for it
without owning it: what the lease limiter's caller relies on to stop waiting
for an invoke that runs on. Pinned on each runtime: asyncio, the simulator's,
and the tests' manual one.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from manual_runtime import ManualRuntime

from simulator.engine.kernel import Kernel
from simulator.engine.runtime import ReplicaClock, SimRuntime
from simulator.engine.traps import Sleep
from stores.asyncio_runtime import AsyncioRuntime


def test_an_asyncio_wait_times_out_and_the_task_runs_on():
    async def scenario() -> None:
        runtime = AsyncioRuntime()
        finished = asyncio.Event()

        async def slow() -> str:
            await asyncio.sleep(0.05)
            finished.set()
            return "late"

        task = runtime.spawn(slow())
        with pytest.raises(TimeoutError):
            await runtime.wait_ms(10, task)
        assert not task.cancelled()
        assert await runtime.wait_ms(1_000, task) == "late"
        assert finished.is_set()

    asyncio.run(scenario())


def test_cancelling_an_asyncio_waiter_does_not_cancel_the_task():
    async def scenario() -> None:
        runtime = AsyncioRuntime()

        async def slow() -> str:
            await asyncio.sleep(0.05)
            return "done"

        task = runtime.spawn(slow())
        waiter = asyncio.create_task(runtime.wait_ms(1_000, task))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await task == "done"

    asyncio.run(scenario())


def test_an_asyncio_wait_reraises_the_tasks_failure():
    async def scenario() -> None:
        runtime = AsyncioRuntime()

        async def failing() -> None:
            raise ValueError("broken")

        with pytest.raises(ValueError, match="broken"):
            await runtime.wait_ms(1_000, runtime.spawn(failing()))

    asyncio.run(scenario())


def simulated_runtime(kernel: Kernel) -> SimRuntime:
    return SimRuntime(kernel, kernel.new_owner("r0"), ReplicaClock(), random.Random(1),
                      random.Random(2))


def test_a_simulated_wait_gives_up_at_its_deadline_and_the_task_runs_on():
    kernel = Kernel(seed=1)
    runtime = simulated_runtime(kernel)
    seen: list[object] = []

    async def slow() -> str:
        await Sleep(5_000)
        seen.append(("task finished", kernel.now))
        return "late"

    async def caller() -> None:
        task = runtime.spawn(slow())
        try:
            await runtime.wait_ms(1, task)
        except TimeoutError:
            seen.append(("timed out", kernel.now))
        seen.append(("waited", await runtime.wait_ms(10, task), kernel.now))

    kernel.spawn(caller(), runtime.owner, "caller")
    kernel.run(20_000)
    assert seen == [("timed out", 1_000), ("task finished", 5_000), ("waited", "late", 5_000)]


def test_cancelling_a_simulated_waiter_does_not_cancel_the_task():
    kernel = Kernel(seed=1)
    runtime = simulated_runtime(kernel)
    seen: list[object] = []

    async def slow() -> None:
        await Sleep(5_000)
        seen.append(("task finished", kernel.now))

    async def waiter(task: object) -> None:
        try:
            await runtime.wait_ms(100, task)
        except asyncio.CancelledError:
            seen.append(("waiter cancelled", kernel.now))
            raise

    task = runtime.spawn(slow())
    waiting = kernel.spawn(waiter(task), runtime.owner, "waiter")
    kernel.run(1_000)
    kernel.cancel(waiting)
    kernel.run(20_000)
    assert seen == [("waiter cancelled", 1_000), ("task finished", 5_000)]


def test_a_manual_wait_runs_the_task_to_its_end_once():
    runtime = ManualRuntime()
    runs: list[int] = []

    async def work() -> int:
        runs.append(1)
        return 7

    async def scenario() -> None:
        task = runtime.spawn(work())
        assert runs == []  # spawning alone runs nothing
        assert await runtime.wait_ms(1, task) == 7
        assert await runtime.wait_ms(1, task) == 7
        await runtime.run_spawned()
        assert runs == [1]

    asyncio.run(scenario())
