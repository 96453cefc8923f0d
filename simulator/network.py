"""Links between replicas and the server: latency, loss, timeouts, retries.

A store call is a message. Sent at ``t``, it may be lost on the way (never
executed); otherwise it executes on the server at ``t + latency``. Its reply
may be lost (executed, never answered); otherwise it reaches the caller one
latency later — unless the caller's timeout fired first. A timed-out call may
therefore have executed: the caller cannot tell, and that ambiguity is the
heart of most races. A driver retry re-sends the same command after a
timeout, so a command may execute twice.

Rules kept here:

* Each link draws from its own seeded stream, and draws the same numbers
  whether or not a fault is enabled (a loss draw happens even at probability
  zero), so turning one fault on does not reshuffle every latency.
* Only the link resumes a caller waiting on a message, and only once: a late
  reply (after a timeout or for an earlier attempt) is traced and dropped.
* Retries follow redis-py's ``ExponentialWithJitterBackoff``:
  ``min(cap, random() * base * 2**failures)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from simulator.backends import Outcome
from simulator.distributions import Distribution
from simulator.kernel import Kernel, Owner, Process
from simulator.server import NOSCRIPT, Command, Server
from simulator.trace import Trace


@dataclass(frozen=True, slots=True)
class LinkSettings:
    latency: Distribution
    request_loss: float
    reply_loss: float
    timeout_us: int
    retries: int
    backoff_base_us: int
    backoff_cap_us: int


class _Call:
    __slots__ = ("process", "token", "command", "attempt", "live_attempt", "resolved")

    def __init__(self, process: Process, command: Command) -> None:
        self.process = process
        self.token = process.token
        self.command = command
        self.attempt = 0
        # The attempt whose reply the driver would still read; 0 between a
        # timeout and the retry (redis-py drops the connection on a timeout).
        self.live_attempt = 0
        self.resolved = False


def error_for(message: str) -> Exception:
    """The exception redis-py raises for an error reply."""
    if message.startswith(NOSCRIPT.split()[0]):
        return NoScriptError(message)
    return ResponseError(message)


def describe(value: object, namespace: str) -> str:
    """A short, backend-independent rendering of a reply for the trace."""
    if value is None:
        return "nil"
    if isinstance(value, list):
        return f"list[{len(value)}]"
    return str(value).removeprefix(namespace)[:60]


class Link:
    """One replica incarnation's connection to the server."""

    def __init__(self, kernel: Kernel, server: Server, trace: Trace, owner: Owner,
                 replica: int, incarnation: int, rng: random.Random,
                 settings: LinkSettings) -> None:
        self.kernel = kernel
        self.server = server
        self.trace = trace
        self.owner = owner
        self.replica = replica
        self.incarnation = incarnation
        self.rng = rng
        self.settings = settings
        self.sent = 0

    def send(self, process: Process, command: Command) -> None:
        self.sent += 1
        self._attempt(_Call(process, command))

    def _latency(self) -> int:
        return max(0, self.settings.latency.sample(self.rng))

    def _record(self, call: _Call, kind: str, outcome: str = "") -> None:
        self.trace.record(self.kernel.now, self.replica, self.incarnation, call.process.tag,
                          kind, outcome=outcome, detail=call.command.label)

    def _attempt(self, call: _Call) -> None:
        if not self.owner.alive:
            return
        call.attempt += 1
        call.live_attempt = call.attempt
        lost = self.rng.random() < self.settings.request_loss
        latency = self._latency()
        if lost:
            self._record(call, "request_lost")
        else:
            self.kernel.after(latency, self._arrive, call, call.attempt)
        self.kernel.after(self.settings.timeout_us, self._time_out, call, call.attempt)

    def _arrive(self, call: _Call, attempt: int) -> None:
        outcome = self.server.execute(call.command)
        self.trace.record(
            self.kernel.now, self.replica, self.incarnation, call.process.tag,
            "call_executed",
            outcome=f"error:{outcome.error.split()[0]}" if outcome.error
            else describe(outcome.value, self.server.backend.namespace),
            detail=call.command.label,
        )
        lost = self.rng.random() < self.settings.reply_loss
        latency = self._latency()
        if lost:
            self._record(call, "reply_lost")
        else:
            self.kernel.after(latency, self._deliver, call, attempt, outcome)

    def _deliver(self, call: _Call, attempt: int, outcome: Outcome) -> None:
        if call.resolved or attempt != call.live_attempt:
            self._record(call, "late_reply")
            return
        call.resolved = True
        if not self.owner.alive:
            self._record(call, "reply_to_dead_replica")
            return
        if outcome.error is not None:
            self.kernel.resume(call.process, call.token, None, error_for(outcome.error))
        else:
            self.kernel.resume(call.process, call.token, outcome.value)

    def _time_out(self, call: _Call, attempt: int) -> None:
        if call.resolved or attempt != call.live_attempt or not self.owner.alive:
            return
        call.live_attempt = 0
        if call.attempt <= self.settings.retries:
            self._record(call, "call_retried", outcome=str(call.attempt))
            self.kernel.after(self._backoff(call.attempt), self._attempt, call)
            return
        call.resolved = True
        self._record(call, "call_timed_out")
        self.kernel.resume(call.process, call.token, None,
                           RedisTimeoutError("Timeout reading from socket"))

    def _backoff(self, failures: int) -> int:
        settings = self.settings
        return round(min(settings.backoff_cap_us,
                         self.rng.random() * settings.backoff_base_us * 2**failures))
