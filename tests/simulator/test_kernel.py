"""The kernel: ordering, traps, crashes and failures."""

from __future__ import annotations

import asyncio

import pytest

from simulator.engine.kernel import Kernel, SimulationError
from simulator.engine.traps import Join, Sleep


def test_events_at_the_same_time_run_in_the_order_they_were_scheduled():
    kernel = Kernel(seed=1)
    order: list[str] = []
    for name in "abcde":
        kernel.at(10, order.append, name)
    kernel.at(5, order.append, "first")
    kernel.run(100)
    assert order == ["first", "a", "b", "c", "d", "e"]


def test_a_sleeping_process_resumes_at_the_virtual_time_it_asked_for():
    kernel = Kernel(seed=1)
    woke: list[int] = []

    async def sleeper():
        await Sleep(250)
        woke.append(kernel.now)
        await Sleep(1_000)
        woke.append(kernel.now)

    kernel.spawn(sleeper(), kernel.new_owner("r0"), "sleeper")
    kernel.run(10_000)
    assert woke == [250, 1_250]


def test_a_crash_drops_coroutines_without_running_their_cleanup():
    kernel = Kernel(seed=1)
    owner = kernel.new_owner("replica-0.0")
    cleanup_ran: list[str] = []

    async def request():
        try:
            await Sleep(1_000)
        except BaseException:
            cleanup_ran.append("except")
            raise
        finally:
            cleanup_ran.append("finally")

    kernel.spawn(request(), owner, "request")
    kernel.run(500)
    assert kernel.crash(owner) == 1
    kernel.run(5_000)
    assert cleanup_ran == []


def test_io_a_dead_replica_attempts_is_swallowed_and_counted():
    kernel = Kernel(seed=1)
    owner = kernel.new_owner("replica-0.0")

    async def request():
        try:
            await Sleep(1_000)
        finally:
            # Cleanup that talks to the outside world: a dead process must not.
            await Sleep(1)

    kernel.spawn(request(), owner, "request")
    kernel.run(500)
    kernel.crash(owner)
    kernel.spawn(request(), owner, "spawned after death")
    kernel.close()
    assert kernel.swallowed_io == 2


def test_an_asyncio_call_inside_the_simulation_fails_loudly():
    kernel = Kernel(seed=7)

    async def store_using_asyncio():
        await asyncio.sleep(0.01)

    kernel.spawn(store_using_asyncio(), kernel.new_owner("replica-3.0"), "request")
    with pytest.raises(SimulationError, match="asyncio") as failure:
        kernel.run(1_000)
    assert "seed 7" in str(failure.value)


def test_an_unhandled_exception_stops_the_run_naming_seed_and_virtual_time():
    kernel = Kernel(seed=42)

    async def broken():
        await Sleep(1_500_000)
        raise KeyError("no such hold")

    kernel.spawn(broken(), kernel.new_owner("replica-9.0"), "request")
    with pytest.raises(SimulationError) as failure:
        kernel.run(10_000_000)
    message = str(failure.value)
    assert "seed 42" in message
    assert "t=1.500000s" in message
    assert "replica-9.0" in message
    assert isinstance(failure.value.__cause__, KeyError)


def test_a_join_with_a_timeout_gives_up_but_leaves_the_process_running():
    kernel = Kernel(seed=1)
    owner = kernel.new_owner("r0")
    seen: list[object] = []

    async def slow():
        await Sleep(5_000)
        seen.append(("slow finished", kernel.now))
        return "late"

    async def caller():
        child = kernel.spawn(slow(), owner, "slow")
        try:
            await Join(child, timeout_us=1_000)
        except TimeoutError:
            seen.append(("timed out", kernel.now))
        seen.append(("joined", await Join(child), kernel.now))

    kernel.spawn(caller(), owner, "caller")
    kernel.run(10_000)
    assert seen == [("timed out", 1_000), ("slow finished", 5_000), ("joined", "late", 5_000)]


def test_a_cancelled_process_runs_its_cleanup_unlike_a_crashed_one():
    kernel = Kernel(seed=1)
    owner = kernel.new_owner("r0")
    cleanup: list[int] = []

    async def work():
        try:
            await Sleep(5_000)
        finally:
            cleanup.append(kernel.now)

    process = kernel.spawn(work(), owner, "work")
    kernel.run(100)
    kernel.cancel(process)
    kernel.run(10_000)
    assert cleanup == [100]
    assert process.finished


def test_a_process_spawned_by_a_request_inherits_its_tag():
    kernel = Kernel(seed=1)
    owner = kernel.new_owner("r0")
    tags: list[int] = []

    async def background():
        tags.append(kernel.current.tag)

    async def request():
        kernel.spawn(background(), owner, "release retry")
        await Sleep(1)

    kernel.spawn(request(), owner, "request", tag=1234)
    kernel.run(100)
    assert tags == [1234]


def test_a_foreign_awaitable_is_refused_as_an_unknown_trap():
    kernel = Kernel(seed=3)

    class Foreign:
        def __await__(self):
            yield "not a trap"

    async def store_awaiting_something_else():
        await Foreign()

    kernel.spawn(store_awaiting_something_else(), kernel.new_owner("r0"), "request")
    with pytest.raises(SimulationError, match="not a kernel trap"):
        kernel.run(10)


def test_a_paused_replica_runs_nothing_and_its_timers_fire_late():
    kernel = Kernel(seed=1)
    owner = kernel.new_owner("replica-0.0")
    woke: list[int] = []

    async def ticker():
        for _ in range(3):
            await Sleep(100)
            woke.append(kernel.now)

    kernel.spawn(ticker(), owner, "ticker")
    kernel.at(150, kernel.pause, owner, 1_000)
    kernel.run(10_000)
    # Ticks due at 200 and 300 wait for the pause to end at 1,150; the one
    # after that is scheduled from the late wake-up.
    assert woke == [100, 1_150, 1_250]


def test_an_event_callback_returning_something_else_than_a_wake_up_stops_the_run_clearly():
    kernel = Kernel(seed=3)
    kernel.after(10, lambda: "oops")
    with pytest.raises(SimulationError, match="returned 'oops'.*wake-up"):
        kernel.run(100)
