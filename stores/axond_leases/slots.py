"""Counting semaphores that never queue: take a slot now, or be refused.

axond caps two kinds of work with ``try_acquire`` on a tokio semaphore, never
``acquire``: invokes in flight on one shared connection (a stalled connection
must not gather an unbounded queue of callers behind it), and release retries
on fresh connections (a burst of failing releases must not open a connection
each). Refusing is the point: the caller degrades at once (an acquire is
unavailable, a release attempt is skipped) instead of waiting.

The release retry cap is process-wide in axond (a static). Here a process is
what a ``Runtime`` stands for (one gateway; one replica incarnation in the
lab, where a whole fleet shares one Python process), so the cap is kept per
runtime: every limiter on one runtime shares it, and the first to ask sets
its size, as the static's first initialisation does.
"""

from __future__ import annotations

import weakref
from typing import Any


class Slot:
    """One taken slot; ``release`` gives it back (once)."""

    __slots__ = ("_slots",)

    def __init__(self, slots: Slots) -> None:
        self._slots: Slots | None = slots

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.taken -= 1


class Slots:
    """``capacity`` slots, taken without waiting."""

    __slots__ = ("capacity", "taken")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.taken = 0

    @property
    def available(self) -> int:
        return self.capacity - self.taken

    def try_take(self) -> Slot | None:
        """A slot, or ``None`` when all are taken (never waits)."""
        if self.taken >= self.capacity:
            return None
        self.taken += 1
        return Slot(self)


_RELEASE_RETRY_SLOTS: weakref.WeakKeyDictionary[Any, Slots] = weakref.WeakKeyDictionary()


def release_retry_slots(runtime: Any, capacity: int) -> Slots:
    """The release retry cap of the process ``runtime`` runs (see above)."""
    slots = _RELEASE_RETRY_SLOTS.get(runtime)
    if slots is None:
        slots = _RELEASE_RETRY_SLOTS[runtime] = Slots(capacity)
    return slots
