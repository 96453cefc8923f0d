"""The one-shot handoff of an owned invoke's outcome to the caller waiting for it.

axond runs each acquire's invoke in a task of its own and hands the outcome
to the caller through a tokio ``oneshot``; the caller's wait may end first
(its timeout, its cancellation). What matters is who learns about a lease the
invoke created: either the caller takes the outcome, or the task learns its
send failed and compensates. ``Handoff`` keeps the oneshot's semantics that
decide this:

* ``send`` fails once the receiver is closed (or a value was already sent);
* ``close`` stops later sends, but a value sent before it can still be taken;
* ``try_take`` tells a value, *empty* (nothing yet, the sender alive) and
  *closed* (nothing will come: the sender is gone, or the receiver closed).

``reclaim_timed_out_acquire`` is what the caller does when its wait timed out.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from stores.axond_leases.outcome import InvokeOutcome

T = TypeVar("T")


class Nothing(enum.Enum):
    """Why ``try_take`` had no value."""

    EMPTY = "empty"
    CLOSED = "closed"


class Handoff(Generic[T]):
    """A oneshot channel: one sender (the invoke's task), one receiver (the caller)."""

    __slots__ = ("_value", "_has_value", "_receiver_closed", "_sender_gone")

    def __init__(self) -> None:
        self._value: T | None = None
        self._has_value = False
        self._receiver_closed = False
        self._sender_gone = False

    def send(self, value: T) -> bool:
        """Hand ``value`` over; ``False`` when nobody will take it."""
        if self._receiver_closed or self._sender_gone or self._has_value:
            return False
        self._value, self._has_value = value, True
        return True

    def drop_sender(self) -> None:
        """The sender is gone: if it sent nothing, nothing will come."""
        self._sender_gone = True

    def close(self) -> None:
        """The receiver stops listening: later sends fail."""
        self._receiver_closed = True

    def try_take(self) -> T | Nothing:
        if self._has_value:
            value, self._value, self._has_value = self._value, None, False
            return value  # type: ignore[return-value]
        if self._sender_gone or self._receiver_closed:
            return Nothing.CLOSED
        return Nothing.EMPTY


@dataclass(frozen=True, slots=True)
class TimedOutAcquire:
    """What a caller whose wait expired found: the outcome if it had arrived
    after all, and whether the lease must be released because of it."""

    result: InvokeOutcome | None
    compensate: bool


def reclaim_timed_out_acquire(handoff: Handoff[InvokeOutcome],
                              before_close: Callable[[], None] = lambda: None) -> TimedOutAcquire:
    """Settle who owns a lease once the caller's wait has expired.

    An outcome already there is the caller's to act on. Nothing yet: close
    the handoff so the task's later send fails and the task compensates --
    but a send can land between the first look and the close, so look once
    more. A sender gone without sending may have written a lease nobody will
    report: compensate. ``before_close`` runs between the look and the close:
    a no-op in production, where a test lands a send to pin that window.
    """
    taken = handoff.try_take()
    if taken is Nothing.CLOSED:
        return TimedOutAcquire(result=None, compensate=True)
    if taken is Nothing.EMPTY:
        before_close()
        handoff.close()
        taken = handoff.try_take()
        if isinstance(taken, Nothing):
            return TimedOutAcquire(result=None, compensate=False)
    return TimedOutAcquire(result=taken, compensate=taken.granted)
