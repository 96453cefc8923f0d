"""The discrete-event kernel: virtual time, a heap of events, coroutine processes.

Rules kept here:

* Time is integer **microseconds** of virtual time (``now``), everywhere.
* Events are ``(time, sequence, callback, args)`` in a heap; the sequence
  number breaks ties, so the same inputs always give the same order.
* A process is a coroutine stepped only by the kernel. It suspends by
  awaiting a trap from ``simulator.engine.traps``; anything else it yields stops the
  run with a message naming the likely cause.
* Every process has an ``Owner`` (a replica incarnation, or the lab). A crash
  marks the owner dead: its coroutines are never resumed again, and no
  ``finally``/``except`` of theirs runs while the run lasts, exactly as when a
  process dies. They are closed only after the run is over, when nothing they
  do can reach the results; any I/O they attempt then is swallowed and counted.
* An exception that escapes a process nobody joins stops the run, naming the
  seed, the virtual time and the process. Nothing is swallowed.
* A paused owner's wake-ups are held until the pause ends (stop-the-world).
* Wake-ups carry the process's ``token``; stepping a process advances it, so a
  second wake-up for the same wait (a reply after a timeout) is ignored.
* A guard (``set_guard``) is called between two events every so many events
  (counted across ``run`` calls) and may stop the run by raising: a run that
  outgrows its budget ends with a message rather than swapping or being
  killed. Counting costs the loop nothing per event: it runs stretches of
  events as a ``for`` over ``repeat``, each ending where the guard is due.
* A wake-up is ``(process, token, value, error)``. It is either an event of
  its own (``wake``, ``spawn``, ``cancel``, a sleep's end) or what an event's
  callback returns (a link delivering a reply): the kernel steps the process
  at once, as that event's last act. Either way the stepping code is the run
  loop's, in one place.
"""

from __future__ import annotations

from asyncio import CancelledError
from collections.abc import Callable, Coroutine
from heapq import heapify, heappop, heappush
from itertools import repeat
from typing import Any

from simulator.engine.traps import Join, Send, Sleep


class SimulationError(RuntimeError):
    """The run cannot go on; the message names the seed and the virtual time."""


class Owner:
    """Whoever processes belong to: one incarnation of a replica, or the lab."""

    __slots__ = ("name", "alive", "paused_until", "processes")

    def __init__(self, name: str) -> None:
        self.name = name
        self.alive = True
        # Stop-the-world: until then nothing of this owner runs; its wake-ups
        # are held and delivered, late and in order, when the pause ends.
        self.paused_until = 0
        self.processes: set[Process] = set()

    def __repr__(self) -> str:
        return f"Owner({self.name!r}, alive={self.alive})"


class Process:
    """A coroutine scheduled by the kernel."""

    __slots__ = ("coro", "owner", "name", "tag", "token", "finished", "result", "error",
                 "joiners")

    def __init__(self, coro: Coroutine[Any, Any, Any], owner: Owner, name: str,
                 tag: int = -1) -> None:
        self.coro = coro
        # What the process works for (a request number), so that messages it
        # sends can be traced back to their request. Inherited by children.
        self.tag = tag
        self.owner = owner
        self.name = name
        self.token = 0
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.joiners: list[tuple[Process, int]] = []

    def __repr__(self) -> str:
        return f"Process({self.name!r} of {self.owner.name!r})"


WakeUp = tuple[Process, int, Any, BaseException | None]
"""``(process, token, value, error)``: step ``process`` with ``value`` (or throw
``error``) if it still waits in the wait ``token`` names."""


def describe_time(now_us: int) -> str:
    return f"t={now_us / 1e6:.6f}s"


def _WAKE_UP(*_: Any) -> None:  # noqa: N802 - a marker, named like a constant
    """The callback of a wake-up event: never called, the run loop knows it
    (its ``args`` are the wake-up itself)."""
    raise AssertionError("a wake-up event is stepped by Kernel.run, never called")


UNGUARDED = 1 << 30
"""Events between two calls of the guard a kernel has before it is given one."""


def _unguarded() -> int:
    return UNGUARDED


class Kernel:
    """Runs events in virtual-time order."""

    # The run loop, ``at`` and ``after`` are the hot path of every run (one
    # call per event): they push onto the heap directly rather than calling
    # each other, count events without a per-event write, and step processes
    # inside the loop (no call per wake-up), handling sleeps and sends without
    # the handler table. None of that changes the order: every event still
    # gets the next sequence number at the moment it is scheduled, so traces
    # stay the same.
    __slots__ = ("seed", "now", "swallowed_io", "_heap", "_sequence", "_discarded", "current",
                 "_graveyard", "_owners", "_guard", "_until_guard", "failures")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.now = 0
        self.swallowed_io = 0
        self._heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._sequence = 0
        self._discarded = 0
        """Events dropped unrun by ``close``."""
        self.current: Process | None = None
        self._graveyard: list[Process] = []
        self._owners: list[Owner] = []
        self._guard: Callable[[], int] = _unguarded
        self._until_guard = UNGUARDED
        """Events the run loop may step before it calls the guard."""
        self.failures: Callable[[Process, BaseException], bool] | None = None
        """Told of a process that failed with nobody joining it; True when it
        took the failure as a finding (a store's call that raised), so the run
        goes on. Unset, or False, and the run stops (``SimulationError``)."""

    def set_guard(self, guard: Callable[[], int], every: int) -> None:
        """Call ``guard()`` once ``every`` more events have run, just before the
        next one; it returns the same count to its next call, and raises to
        stop the run (``simulator.run.limits``)."""
        self._guard = guard
        self._until_guard = max(1, every)

    @property
    def events_run(self) -> int:
        """Events run so far: every event scheduled leaves the heap only by
        running (or, after the run, by ``close``), so no per-event count is kept."""
        return self._sequence - len(self._heap) - self._discarded

    # -- scheduling -------------------------------------------------------

    def at(self, time_us: int, callback: Callable[..., WakeUp | None], *args: Any) -> None:
        """Run ``callback(*args)`` at virtual time ``time_us`` (not before now); if
        it returns a wake-up, step that process then."""
        if time_us < self.now:
            raise self._in_the_past(time_us)
        self._sequence = sequence = self._sequence + 1
        heappush(self._heap, (time_us, sequence, callback, args))

    def after(self, delay_us: int, callback: Callable[..., WakeUp | None], *args: Any) -> None:
        """Run ``callback(*args)`` ``delay_us`` from now (not negative)."""
        if delay_us < 0:
            raise self._in_the_past(self.now + delay_us)
        self._sequence = sequence = self._sequence + 1
        heappush(self._heap, (self.now + delay_us, sequence, callback, args))

    @property
    def scheduled(self) -> int:
        """The sequence number of the event scheduled last."""
        return self._sequence

    def reschedule(self, dropped: Callable[[Callable[..., Any], tuple[Any, ...]], bool],
                   added: list[tuple[int, Callable[..., WakeUp | None], tuple[Any, ...]]],
                   after: int) -> None:
        """Drop the pending events ``dropped(callback, args)`` picks, and add
        ``added`` (``(time, callback, args)``, in order) as though they had
        been scheduled right after the event numbered ``after``: among events
        of one instant, after those scheduled up to it and before every one
        scheduled since. A run whose plans changed (``World.replan``) thus
        orders its events as if it had been planned so from the start. No
        event runs, so ``events_run`` stays what it was."""
        kept = [event for event in self._heap if not dropped(event[2], event[3])]
        removed = len(self._heap) - len(kept)
        share = 1 / (len(added) + 1)
        for place, (time_us, callback, args) in enumerate(added, start=1):
            if time_us < self.now:
                raise self._in_the_past(time_us)
            # A number between ``after`` and the next one: no event has it.
            kept.append((time_us, after + place * share, callback, args))
        heapify(kept)
        self._heap[:] = kept
        self._discarded += removed - len(added)

    def _in_the_past(self, time_us: int) -> SimulationError:
        return SimulationError(
            f"an event was scheduled in the past ({time_us} < {self.now}); "
            f"seed {self.seed}, {describe_time(self.now)}"
        )

    def run(self, until_us: int) -> None:
        """Run every event due up to and including ``until_us``."""
        heap = self._heap
        # In stretches that end where the guard is due; what is left of one
        # carries over to the next ``run``.
        while True:
            first = self.events_run
            self._run_events(until_us, self._until_guard)
            self._until_guard -= self.events_run - first
            if not (heap and heap[0][0] <= until_us):
                break
            self._until_guard = self._guard()  # an event is due: the stretch ran out
        if until_us > self.now:
            self.now = until_us

    def _run_events(self, until_us: int, most: int) -> None:
        """Run the events due up to ``until_us``, at most ``most`` of them."""
        heap = self._heap
        pop = heappop
        for _ in repeat(None, most):
            if not heap or heap[0][0] > until_us:
                return
            time_us, _, callback, args = pop(heap)
            self.now = time_us
            wake_up = args if callback is _WAKE_UP else callback(*args)
            if wake_up is None:
                continue
            try:
                process, token, value, error = wake_up
                stale = process.token != token or process.finished
            except (TypeError, ValueError, AttributeError):
                raise SimulationError(self._not_a_wake_up(callback, wake_up)) from None
            if stale:
                continue
            owner = process.owner
            if not owner.alive:
                continue
            if owner.paused_until > time_us:
                self.at(owner.paused_until, _WAKE_UP, process, token, value, error)
                continue
            process.token = token + 1
            self.current = process
            try:
                if error is None:
                    trap = process.coro.send(value)
                else:
                    trap = process.coro.throw(error)
            except StopIteration as stop:
                self._finish(process, stop.value, None)
                continue
            except (KeyboardInterrupt, SystemExit):
                raise  # the lab told to stop (Ctrl-C, SIGTERM), not the process failing
            except BaseException as failure:  # noqa: BLE001 - handed to joiners or stops the run
                self._finish(process, None, failure)
                continue
            finally:
                self.current = None
            # The three traps, commonest first; a sleep's end is pushed here
            # directly, as ``at`` would, without the call.
            if trap.__class__ is Sleep:
                delay_us = trap.delay_us
                self._sequence = sequence = self._sequence + 1
                heappush(heap, (time_us + delay_us if delay_us > 0 else time_us, sequence,
                                _WAKE_UP, (process, process.token, None, None)))
            elif trap.__class__ is Send:
                trap.link.send(process, trap.command)
            elif trap.__class__ is Join:
                self._on_join(process, trap)
            else:
                raise SimulationError(self._unknown_trap(process, trap))

    # -- processes --------------------------------------------------------

    def new_owner(self, name: str) -> Owner:
        owner = Owner(name)
        self._owners.append(owner)
        return owner

    def spawn(self, coro: Coroutine[Any, Any, Any], owner: Owner, name: str,
              tag: int | None = None) -> Process:
        """Start ``coro`` now (after the events already due now). Without a
        ``tag`` the new process works for whatever the spawning process does."""
        if tag is None:
            tag = self.current.tag if self.current is not None else -1
        if not owner.alive:
            # A dead replica's cleanup code trying to start work: swallowed.
            self.swallowed_io += 1
            coro.close()
            return Process(coro, owner, name, tag)
        process = Process(coro, owner, name, tag)
        owner.processes.add(process)
        self.at(self.now, _WAKE_UP, process, process.token, None, None)
        return process

    def wake(self, process: Process, delay_us: int, value: Any = None,
             error: BaseException | None = None) -> None:
        """Resume ``process`` from its current wait after ``delay_us``."""
        self.after(delay_us, _WAKE_UP, process, process.token, value, error)

    def cancel(self, process: Process) -> None:
        """Throw ``CancelledError`` into ``process`` at its current await."""
        if not process.finished:
            self.at(self.now, _WAKE_UP, process, process.token, None, CancelledError())

    def pause(self, owner: Owner, duration_us: int) -> None:
        """Stop the world for ``owner``: nothing it runs moves until the pause
        ends, and every timer it set fires late."""
        owner.paused_until = max(owner.paused_until, self.now + duration_us)

    def crash(self, owner: Owner) -> int:
        """Kill ``owner``: its processes stop where they are, with no cleanup.
        Returns how many processes were dropped."""
        owner.alive = False
        dropped = len(owner.processes)
        self._graveyard.extend(owner.processes)
        owner.processes.clear()
        return dropped

    def close(self) -> None:
        """After the run: close every coroutine still suspended. Their cleanup
        code may run now, but any I/O it attempts is swallowed and counted."""
        leftovers = list(self._graveyard)
        for owner in self._owners:
            owner.alive = False
            leftovers.extend(owner.processes)
            owner.processes.clear()
        self._graveyard.clear()
        self._discarded += len(self._heap)
        self._heap.clear()
        for process in leftovers:
            try:
                process.coro.close()
            except RuntimeError:
                # The coroutine awaited inside its cleanup: that is I/O.
                self.swallowed_io += 1

    def _finish(self, process: Process, result: Any, error: BaseException | None) -> None:
        process.finished = True
        process.result = result
        process.error = error
        process.owner.processes.discard(process)
        for joiner, token in process.joiners:
            self.at(self.now, _WAKE_UP, joiner, token, result, error)
        if error is not None and not process.joiners and not isinstance(error, CancelledError):
            if self.failures is not None and self.failures(process, error):
                return
            hint = ""
            if isinstance(error, RuntimeError) and "event loop" in str(error):
                hint = (" (an asyncio call ran inside the simulation, where no event loop "
                        "exists; stores must await only their ports)")
            raise SimulationError(
                f"{process.name} on {process.owner.name} failed at {describe_time(self.now)} "
                f"(seed {self.seed}): {type(error).__name__}: {error}{hint}"
            ) from error

    def _not_a_wake_up(self, callback: Any, returned: Any) -> str:
        return (f"the event callback {callback!r} returned {returned!r} at "
                f"{describe_time(self.now)} (seed {self.seed}); an event's callback returns "
                "None, or a wake-up (process, token, value, error) for the kernel to step")

    def _unknown_trap(self, process: Process, trap: Any) -> str:
        hint = "only simulator.engine.traps objects may be awaited inside a simulation"
        module = type(trap).__module__
        if module.startswith("asyncio") or trap is None:
            hint = (
                "it looks like an asyncio call (asyncio.sleep, a Future, a lock...) ran "
                "inside the simulation; stores must await only their ports"
            )
        return (
            f"{process.name} on {process.owner.name} yielded {trap!r}, which is not a kernel "
            f"trap, at {describe_time(self.now)} (seed {self.seed}): {hint}"
        )

    # -- the join trap ----------------------------------------------------

    def _on_join(self, process: Process, trap: Join) -> None:
        target = trap.process
        if target.finished:
            self.wake(process, 0, target.result, target.error)
            return
        target.joiners.append((process, process.token))
        if trap.timeout_us is not None:
            self.wake(process, trap.timeout_us, None, TimeoutError())
