"""A store that never gives the simulation back: its run bounded in wall time.

A store can loop without ever waiting (a mutant's background loop whose
sleep was removed spins at one virtual instant): no kernel event runs, so
the run's own limits (``simulator.run.limits``, checked between events)
never see it, and whoever waits for the run would wait for ever. ``bounded``
stops such a block from the outside, by a wall-clock alarm in the main
thread of its process, and raises ``Hung``: the store never returned, which
is a finding of its own (a liveness bug), not a lab error. A hunt bounds
each run where it runs (``Judge.run_bound_s``), in its worker processes
too; ``Hung`` crosses back to the driver as itself.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Hung(KeyboardInterrupt):
    """The block ran past its wall-time bound: the store never gave the simulation back.

    A ``KeyboardInterrupt``, as ``simulator.run.stopping.Terminated`` is: the
    kernel re-raises it rather than file it as the process failing (a
    replica whose loop failed is restarted, and its next loop would spin
    with no alarm left), and Hypothesis passes it through a hunt."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no progress within {seconds:g} s of wall time")
        self.seconds = seconds

    def __reduce__(self) -> tuple[type[Hung], tuple[float]]:
        # Rebuilt from its bound, not its message: a worker's Hung reaches the driver.
        return Hung, (self.seconds,)


@contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Raise ``Hung`` in the block once it has run ``seconds`` of wall time
    (in the main thread, where signals land; elsewhere, unbounded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise Hung(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
