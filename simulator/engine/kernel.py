# cython: boundscheck=False, wraparound=False
# (For the compiled build: KeyedHeap's indices are in range by construction,
# and nothing else in this module indexes with a C integer or a negative one.)
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

from array import array
from asyncio import CancelledError
from collections.abc import Callable, Coroutine
from heapq import heappop, heappush
from itertools import repeat
from typing import Any

from simulator.engine.traps import Join, Send, Sleep

try:
    import cython
    COMPILED: bool = cython.compiled
except ImportError:  # the lab runs without Cython, interpreted
    COMPILED = False


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


Event = tuple[int, int, Callable[..., Any], tuple[Any, ...]]
"""``(time, sequence, callback, args)``: no two events share a sequence number,
so every heap below pops the events of a run in one and the same order."""


class TupleHeap:
    """The events to come, soonest first: ``heapq`` on the event tuples, which
    compares them in C (the interpreted build's queue)."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: list[Event] = []

    def __len__(self) -> int:
        return len(self._events)

    def push(self, event: Event) -> None:
        heappush(self._events, event)

    def due(self, until_us: int) -> bool:
        """Whether an event is due at or before ``until_us``."""
        events = self._events
        return bool(events) and events[0][0] <= until_us

    def pop(self) -> Event:
        return heappop(self._events)

    def clear(self) -> None:
        """Drop every event to come."""
        self._events = []


INITIAL_CAPACITY = 1024


def _integers(capacity: int) -> memoryview:
    return memoryview(array("q", bytes(8 * capacity)))


class KeyedHeap:
    """The same queue with each event's time and sequence number kept apart in
    arrays of machine integers (the compiled build's queue).

    ``kernel.pxd`` types those arrays, so that a push or a pop compares two
    C integers where ``heapq`` compares two tuples through their elements.
    The heap itself is an array of slot numbers into ``_events``: sifting moves
    integers, never touching an event object (whose reference count would
    cost a cache miss each). The sifting is ``heapq``'s (a pop walks the hole
    down to a leaf, then the last entry up), and keys are unique, so the order
    is the ``TupleHeap``'s exactly. Interpreted it is correct but slower than
    ``TupleHeap`` (the sifting in Python), which is why that build keeps
    ``heapq``."""

    __slots__ = ("_times", "_sequences", "_slots", "_free", "_events", "_size", "_free_count")

    def __init__(self) -> None:
        self._times = _integers(INITIAL_CAPACITY)
        self._sequences = _integers(INITIAL_CAPACITY)
        self._slots = _integers(INITIAL_CAPACITY)
        """The heap: entry ``i`` is the event in ``_events[_slots[i]]``."""
        self._free = _integers(INITIAL_CAPACITY)
        """Slots of ``_events`` no event holds, the first ``_free_count`` of them."""
        self._events: list[Event | None] = []
        self._size = 0
        self._free_count = 0

    def __len__(self) -> int:
        return self._size

    # The arrays are read through ``self`` rather than locals: a typed
    # memoryview held in a local costs an atomic reference count each time.

    def push(self, event: Event) -> None:
        time_us = event[0]
        sequence = event[1]
        if self._size == len(self._times):
            self._grow()
        if self._free_count:
            self._free_count -= 1
            slot = self._free[self._free_count]
            self._events[slot] = event
        else:
            slot = len(self._events)
            self._events.append(event)
        position = self._size
        self._size = position + 1
        self._rise(position, time_us, sequence, slot)

    def due(self, until_us: int) -> bool:
        """Whether an event is due at or before ``until_us``."""
        return self._size > 0 and self._times[0] <= until_us

    def pop(self) -> Event:
        slot = self._slots[0]
        first = self._events[slot]
        self._events[slot] = None
        self._free[self._free_count] = slot
        self._free_count += 1
        size = self._size - 1
        self._size = size
        if size == 0:
            return first
        last_time = self._times[size]
        last_sequence = self._sequences[size]
        last_slot = self._slots[size]
        # The hole left by the first entry goes down to a leaf, the smaller
        # child moving up each time...
        position = 0
        child = 1
        while child < size:
            right = child + 1
            if right < size and self._before(right, child):
                child = right
            self._times[position] = self._times[child]
            self._sequences[position] = self._sequences[child]
            self._slots[position] = self._slots[child]
            position = child
            child = 2 * position + 1
        # ... and the last entry fills it, moving up to its place.
        self._rise(position, last_time, last_sequence, last_slot)
        return first

    def _before(self, one: int, other: int) -> bool:
        """Whether the entry at ``one`` comes before the entry at ``other``."""
        return self._times[one] < self._times[other] or (
            self._times[one] == self._times[other]
            and self._sequences[one] < self._sequences[other])

    def _rise(self, position: int, time_us: int, sequence: int, slot: int) -> None:
        """Put an entry in the heap's hole at ``position``, moving the hole up
        (each parent down) while the entry comes before the parent."""
        while position > 0:
            parent = (position - 1) >> 1
            parent_time = self._times[parent]
            if time_us < parent_time or (time_us == parent_time
                                         and sequence < self._sequences[parent]):
                self._times[position] = parent_time
                self._sequences[position] = self._sequences[parent]
                self._slots[position] = self._slots[parent]
                position = parent
            else:
                break
        self._times[position] = time_us
        self._sequences[position] = sequence
        self._slots[position] = slot

    def clear(self) -> None:
        """Drop every event to come."""
        self._events = []
        self._size = 0
        self._free_count = 0

    def _grow(self) -> None:
        size = self._size
        capacity = 2 * len(self._times)
        times = _integers(capacity)
        sequences = _integers(capacity)
        slots = _integers(capacity)
        free = _integers(capacity)
        times[:size] = self._times[:size]
        sequences[:size] = self._sequences[:size]
        slots[:size] = self._slots[:size]
        free[:self._free_count] = self._free[:self._free_count]
        self._times = times
        self._sequences = sequences
        self._slots = slots
        self._free = free


def event_heap() -> TupleHeap | KeyedHeap:
    """The queue the build runs fastest: ``KeyedHeap`` compiled, ``TupleHeap`` not."""
    return KeyedHeap() if COMPILED else TupleHeap()


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
        self._heap = event_heap()
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
        self._heap.push((time_us, sequence, callback, args))

    def after(self, delay_us: int, callback: Callable[..., WakeUp | None], *args: Any) -> None:
        """Run ``callback(*args)`` ``delay_us`` from now (not negative)."""
        if delay_us < 0:
            raise self._in_the_past(self.now + delay_us)
        self._sequence = sequence = self._sequence + 1
        self._heap.push((self.now + delay_us, sequence, callback, args))

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
            if not heap.due(until_us):
                break
            self._until_guard = self._guard()  # an event is due: the stretch ran out
        if until_us > self.now:
            self.now = until_us

    def _run_events(self, until_us: int, most: int) -> None:
        """Run the events due up to ``until_us``, at most ``most`` of them."""
        heap = self._heap
        for _ in repeat(None, most):
            if not heap.due(until_us):
                return
            time_us, _, callback, args = heap.pop()
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
            # (``sleep`` and ``send`` are typed in ``kernel.pxd``: compiled, their
            # fields are read as a struct's.)
            if trap.__class__ is Sleep:
                sleep = trap
                delay_us = sleep.delay_us
                self._sequence = sequence = self._sequence + 1
                heap.push((time_us + delay_us if delay_us > 0 else time_us, sequence,
                           _WAKE_UP, (process, process.token, None, None)))
            elif trap.__class__ is Send:
                send = trap
                send.link.send(process, send.command)
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
