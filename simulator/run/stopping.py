"""A command told to stop (Ctrl-C, SIGTERM) stops as a run ends: in one line.

Ctrl-C raises ``KeyboardInterrupt`` in the main thread; ``terminate_as_interrupt``
makes SIGTERM do the same (``Terminated``, a ``KeyboardInterrupt`` carrying its
signal), so whatever cleans up on an exception — a run's keys, library and
schema, a throwaway server, a sweep's or hunt's workers — cleans up on either.
The command then says it was stopped, by what, and exits as a shell reports a
process ended by that signal (``stopped_exit``: 130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is."""

    signum = signal.SIGTERM


_requested: list[int] = []
"""The signal a command was told to stop by, once it was (``raise_if_told``)."""


def raise_if_told() -> None:
    """Stop here if a signal said to: a safe point (each step of a run's
    virtual time). A signal's handler raises wherever the main thread is, and
    there (a finaliser, a callback the garbage collector runs) the exception
    may be swallowed; the request it leaves is honoured at the next safe point."""
    if _requested:
        raise _stop_for(_requested[0])


def _stop_for(signum: int) -> KeyboardInterrupt:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def signal_of(stop: BaseException) -> int:
    """The signal that stopped a command: SIGTERM for ``Terminated``, else SIGINT."""
    return getattr(stop, "signum", signal.SIGINT)


def stopped_exit(stop: BaseException) -> int:
    """The exit status of a command stopped by ``stop``'s signal."""
    return 128 + signal_of(stop)


def signal_name(stop: BaseException) -> str:
    return signal.Signals(signal_of(stop)).name


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the block as Ctrl-C does (an exception in the main thread)
    instead of ending the process on the spot. Only the main thread can take a
    signal, and a SIGTERM the caller ignores stays ignored."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN):
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        _requested.append(signum)
        raise Terminated

    def interrupt(signum: int, frame: FrameType | None) -> None:
        _requested.append(signum)
        raise KeyboardInterrupt

    def quiet_when_told(unraisable: sys.UnraisableHookArgs) -> None:
        # A signal's exception raised where Python cannot raise it (a garbage
        # collector's callback, a finaliser) is printed as "Exception
        # ignored"; the request it left is honoured at the next safe point.
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _requested):
            previous_hook(unraisable)

    previous_hook = sys.unraisablehook
    sys.unraisablehook = quiet_when_told
    previous = signal.signal(signal.SIGTERM, terminate)
    # Ctrl-C likewise, unless the caller ignores it (a job in the background).
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        # A library that handles the signal's exception may raise another in
        # its place (Hypothesis asserts on its half-built state when the
        # signal lands while it builds it): once told, the stop is what ended
        # the block, whatever came out of it.
        if _requested:
            raise _stop_for(_requested[0]) from error
        raise
    finally:
        # None: a handler not set from Python, which Python cannot restore.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        sys.unraisablehook = previous_hook
        _requested.clear()
