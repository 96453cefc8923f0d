"""Pipelined execution: the server's work queued in arrival order, sent to the
backend in one round trip when a result is needed.

A command's result is only *observed* when its reply is delivered (or when the
lab itself looks: an oracle sample, a server fault, the end of the run). Until
then the server can queue it. Everything that would have happened *because*
of its result is queued behind it, in order: the oracle's reading of its
post-state, and every fact the gateways report to the oracle meanwhile. A
flush sends the queued commands as one pipeline, then applies the queued
effects in their original order, so the oracle sees exactly the sequence it
would have seen had each command run alone — and the trace, the metrics and
the summary are identical with and without pipelining.

Rules kept here:

* The kernel's event order never changes; only the backend's work moves later.
* Whatever needs a value flushes first: a reply delivered to a live caller, a
  read of the oracle, a fault on the server, a key about to expire, the end.
* A command queued at ``t`` may set a TTL of at least 1 ms, so no key it
  touches can expire before ``t + 1 ms``: the queue is flushed before a
  command that arrives later than that (``EXPIRY_HORIZON_US``), so expiry is
  always judged on known deadlines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulator.backends import Outcome

EXPIRY_HORIZON_US = 1_000
"""The shortest TTL a script can set (1 ms): how long a queue may span."""


class Pending:
    """The outcome of a queued command, known after the next flush."""

    __slots__ = ("outcome", "_waiters")

    def __init__(self) -> None:
        self.outcome: Outcome | None = None
        self._waiters: list[Callable[[Outcome], None]] = []

    def when_done(self, callback: Callable[[Outcome], None]) -> None:
        if self.outcome is not None:
            callback(self.outcome)
        else:
            self._waiters.append(callback)

    def resolve(self, outcome: Outcome) -> None:
        self.outcome = outcome
        for callback in self._waiters:
            callback(outcome)
        self._waiters.clear()


def when_done(outcome: Outcome | Pending, callback: Callable[[Outcome], None]) -> None:
    """Call ``callback`` with the outcome now, or once its command has run."""
    if isinstance(outcome, Pending):
        outcome.when_done(callback)
    else:
        callback(outcome)


class DeferredOracle:
    """The oracle as the simulated world sees it while commands are queued:
    facts wait in the server's queue, in order; any other use flushes first.

    ``facts`` names the oracle's methods that record a fact and answer
    nothing (the core's, ``simulator.plugin.protocol.CORE_FACTS``, and its
    family's): only those may wait behind the commands that came before them."""

    def __init__(self, oracle: Any, server: Any, facts: frozenset[str]) -> None:
        self._oracle = oracle
        self._server = server
        for name in facts:
            setattr(self, name, _deferred(server, getattr(oracle, name)))

    def __getattr__(self, name: str) -> Any:
        # Only reached for what is not a fact: a read, which must see it all.
        self._server.flush()
        return getattr(self._oracle, name)


def _deferred(server: Any, fact: Callable[..., Any]) -> Callable[..., None]:
    def deferred(*args: Any) -> None:
        server.after_queued(fact, args)
    return deferred
