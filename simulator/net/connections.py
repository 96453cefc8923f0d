"""A multiplexed connection: many callers share one connection, replies matched in order.

What a Redis driver's multiplexed connection does (redis-rs's
``MultiplexedConnection`` and ``ConnectionManager``; a redis-py connection
read by more than one task behaves the same way): requests from every caller
go out on one stream, in the order sent; the server answers them in the
order it executed them; the driver hands each reply to the oldest caller
still in its queue. Nothing in a reply says whose it is, so anything that
adds or removes one reply or one waiter shifts every later reply onto the
wrong caller — until the connection is dropped. That is the mechanism behind
axond's echoed lease ids and connection generations, and this module models
it literally.

Rules kept here (on top of ``simulator.net.links.Link``'s):

* One stream each way: a request never overtakes an earlier one on the same
  connection, and neither does a reply (a slow reply holds up those behind it).
* Each sent request takes a place in the waiter queue when it is sent; each
  reply that reaches the driver goes to the head of the queue, whatever
  command it answers. A caller who stopped waiting (its timeout, a
  cancellation) keeps its place, so its reply is read and discarded and the
  queue stays aligned, as a correct driver does.
* A message lost on the way (``request_loss``, ``reply_loss``, a partition, a
  scheduled loss) loses its reply while its waiter keeps its place: the
  callers behind it each receive the reply meant for the caller behind them.
  A ``dropped_waiter`` fault removes a waiter while its reply is still coming:
  the caller behind it receives its reply, and every later caller its
  predecessor's. Either way the receiver is told ``misaligned_reply``.
* A stalled connection executes what it receives and never answers again. A
  reset fails every caller waiting on the connection with ``ConnectionError``
  and loses the requests still on the way; the driver then reconnects, so
  later calls go out on a fresh stream with an empty queue.
* ``aclose`` closes the connection: later calls fail at once, later replies
  are read by nobody.
"""

from __future__ import annotations

from collections import deque

from simulator.backends import Outcome
from simulator.engine.kernel import WakeUp
from simulator.net.links import CLOSED, RESET, Link, _Call
from simulator.net.pipeline import Pending

CONNECTION_EVENTS = (
    "connection_opened", "connection_stalled", "connection_reset", "slow_reply",
    "waiter_dropped", "misaligned_reply", "fault_connection_stall", "fault_connection_reset",
    "fault_slow_reply", "fault_dropped_waiter",
)
"""What connections did (the events this module and the links trace): counted
in the summary by the families whose stores open connections of their own."""



class MultiplexedConnection(Link):
    """One connection of a replica, shared by all its callers (see the module docstring)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.waiters: deque[tuple[_Call, int]] = deque()
        self.stream = 0
        """Bumped by every reset: messages of an earlier stream are gone."""
        self.last_arrival_us = 0
        self.last_reply_us = 0
        self.stalled = False
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def _attempt(self, call: _Call) -> None:
        if not self.owner.alive or self._held_by_pause(self._attempt, call):
            return
        if self.closed:
            self.kernel.at(self.kernel.now, self._fail, call, call.attempt, CLOSED)
            return
        call.attempt += 1
        call.live_attempt = call.attempt
        lost = self.rng.random() < self.settings.request_loss
        latency = self._latency()
        now = self.kernel.now
        if self.network.forced:
            self._arm(call)
        armed = call.armed or {}
        if "drop_waiter" in armed:
            self._record(call, "waiter_dropped")
        else:
            self.waiters.append((call, call.attempt))
        if "stall" in armed and not self.stalled:
            self.stalled = True
            self.trace.record(now, self.replica, self.incarnation, call.process.tag,
                              "connection_stalled_from", detail=call.command.label)
        if self._on_its_way(call, lost, now):
            arrival = max(now + latency, self.last_arrival_us)
            self.last_arrival_us = arrival
            self.kernel.at(arrival, self._arrive_on_stream, call, call.attempt, self.stream)
        self.kernel.after(self.settings.timeout_us, self._time_out, call, call.attempt)

    def _arrive_on_stream(self, call: _Call, attempt: int, stream: int) -> None:
        if stream != self.stream:
            self._record(call, "request_lost", "reset")
            return
        self._arrive(call, attempt)

    def _armed_reply(self, call: _Call, attempt: int, outcome: Outcome | Pending,
                     delay_us: int) -> None:
        armed = call.armed
        assert armed is not None
        if "reset" in armed:
            self._reset(call)
            return
        if "slow" in armed:
            self._record(call, "slow_reply", str(armed["slow"]))
            delay_us += armed["slow"]
        self._reply(call, attempt, outcome, delay_us)

    def _reply(self, call: _Call, attempt: int, outcome: Outcome | Pending,
               delay_us: int) -> None:
        """The reply goes back on the stream, behind every earlier reply."""
        at = max(self.kernel.now + delay_us, self.last_reply_us)
        self.last_reply_us = at
        self.kernel.at(at, self._reply_arrives, call, outcome, self.stream)

    def _reply_arrives(self, answered: _Call, outcome: Outcome | Pending,
                       stream: int) -> WakeUp | None:
        """A reply reaches the driver: the oldest waiter gets it."""
        if stream != self.stream or self.closed:
            return None
        if self._held_by_pause(self._reply_arrives, answered, outcome, stream):
            return None
        if self.stalled:
            self._record(answered, "connection_stalled")
            return None
        if not self.waiters:
            self._record(answered, "late_reply", "no waiter")
            return None
        receiver, attempt = self.waiters.popleft()
        if receiver is not answered:
            self._record(receiver, "misaligned_reply", answered.command.label)
        return self._deliver(receiver, attempt, outcome)

    def _reset(self, call: _Call) -> None:
        """The connection resets after ``call`` executed (see the module docstring)."""
        self._record(call, "connection_reset")
        self.stream += 1
        self.stalled = False
        waiting, self.waiters = list(self.waiters), deque()
        for receiver, attempt in waiting:
            if receiver is not call:
                self._record(receiver, "connection_reset")
            self.kernel.at(self.kernel.now, self._fail, receiver, attempt, RESET)
        # Reconnecting takes a round trip before the next request can arrive.
        self.last_arrival_us = self.kernel.now + self._latency()
        self.last_reply_us = self.kernel.now

    def _fail(self, call: _Call, attempt: int, message: str) -> WakeUp | None:
        return self._deliver(call, attempt, Outcome.failed(message))
