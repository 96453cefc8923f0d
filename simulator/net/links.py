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
from collections.abc import Callable
from dataclasses import dataclass, field

from redis._parsers.base import BaseParser
from redis.exceptions import ClusterError, NoScriptError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from simulator.backends import Outcome
from simulator.backends.slots import CROSSSLOT, REDIRECTS, redirected_to
from simulator.engine.kernel import Kernel, Owner, Process, WakeUp
from simulator.engine.trace import UNKNOWN_YET, Trace
from simulator.net.pipeline import Pending, when_done
from simulator.net.server import NOSCRIPT, Command, Server
from simulator.scenario.distributions import Distribution
from simulator.scenario.faults import FAULT_KINDS


@dataclass(frozen=True, slots=True)
class LinkSettings:
    latency: Distribution
    request_loss: float
    reply_loss: float
    timeout_us: int
    retries: int
    backoff_base_us: int
    backoff_cap_us: int
    multiplexed: bool = False
    """The replica's own port is one multiplexed connection
    (``simulator.net.connections``) instead of a pool (``Link``)."""
    follows_redirects: bool = True
    """On a cluster, the replica's client follows redirects (``ClusterSettings``)."""


@dataclass
class ReplicaNetwork:
    """Where one replica sits on the network: shared by its incarnations, so a
    partition or a scheduled loss outlives a restart."""

    cut_requests_until: int = 0
    cut_replies_until: int = 0
    forced: list[list] = field(default_factory=list)
    """Scheduled faults armed for the replica's next matching calls:
    ``[kind, label or None, remaining, extra_us]``. Kinds: ``request`` and
    ``reply`` (lost), and the connection faults of ``CONNECTION_FAULTS``."""
    connections_opened: int = 0
    """Connections its incarnations opened so far: each draws from its own stream."""

    def take_forced(self, kind: str, label: str) -> bool:
        return self.take_forced_entry(kind, label) is not None

    def take_forced_entry(self, kind: str, label: str) -> list | None:
        """The armed entry of ``kind`` matching a call labelled ``label``,
        one use of it spent; ``None`` if none is armed."""
        for entry in self.forced:
            if entry[0] == kind and entry[1] in (None, label) and entry[2] > 0:
                entry[2] -= 1
                return entry
        return None


CONNECTION_FAULTS = {name: kind.armed for name, kind in FAULT_KINDS.items() if kind.connection}
"""The connection faults a schedule (or a rate) arms on a replica's next
matching call, by fault name, with the armed kind ``ReplicaNetwork.forced`` keeps:

* ``connection_stall``: the call's connection accepts and executes but never
  answers again (every later reply on it is withheld);
* ``connection_reset``: the call's connection is reset once the call has
  executed: every caller waiting on it gets ``ConnectionError``, and requests
  still on the way are lost;
* ``slow_reply``: the call's reply takes ``extra`` longer (on a multiplexed
  connection, the replies behind it wait too);
* ``dropped_waiter``: the caller's waiter is dropped from its connection's
  queue while its reply is still coming: on a multiplexed connection the
  next caller receives this reply, and every later one its predecessor's.
"""


MESSAGE_FAULTS = frozenset({"request_lost", "reply_lost", "call_timed_out", "call_refused",
                            "call_retried", "duplicate_execution", "late_reply",
                            "reply_to_dead_replica", "misaligned_reply", "waiter_dropped",
                            "connection_stalled", "connection_reset", "slow_reply",
                            "connect_failed", "cluster_refused"})
"""What the network did to a request's messages: the facts a verdict may blame.
(``cluster_refused``: a cluster's node refused the call for its keys' slots,
``CROSSSLOT`` or a script's undeclared key; not a fault, the cluster itself
exposing a store's keys, so damage it exposes is filed as exposed by it.)"""

CALLER_MAY_NOT_KNOW = frozenset({"request_lost", "reply_lost", "call_timed_out",
                                 "call_refused", "reply_to_dead_replica", "misaligned_reply",
                                 "waiter_dropped", "connection_stalled", "connection_reset",
                                 "connect_failed"})
"""The message faults after which the caller may not know what its call did:
no reply reached it (lost either way, timed out, refused, stalled, reset, its
waiter dropped, its connection never opened, or it had died), or the reply it
read was another call's. The rest (``CALLER_KNOWS``) leave it knowing: a
driver's re-send and the second execution it may cause, a slowed reply (past
the timeout, the call times out as well), a reply after the caller gave up
(it had timed out), a cluster's refusal (an error reply). Every family's
oracle reads this one set."""
CLUSTER_REFUSALS = (CROSSSLOT, "ERR Script attempted to access ")
"""How the error replies begin that a cluster's node gives for a call's
keys: keys in several slots, a script's undeclared key elsewhere."""
CALLER_KNOWS = MESSAGE_FAULTS - CALLER_MAY_NOT_KNOW

ANSWERED = "<-"
"""For a ``misaligned_reply``, the oracle is told ``RECEIVER<-ANSWERED``: the
call that read the reply, and the call whose reply it was."""


def misread(call: str) -> tuple[str, str]:
    """``(receiver, answered)`` of a ``misaligned_reply``'s call (``answered``
    empty for any other fault's)."""
    receiver, _, answered = call.partition(ANSWERED)
    return receiver, answered


class FaultClock:
    """When the last fault of the run happened (losses included), for the
    oracle's convergence measure, and who hears of each message fault: the
    oracle blames damage on what the lab did to a request, never on what the
    store's record looks like, so it is told of every loss, timeout, refusal
    and duplicate, tagged with the request whose message it hit."""

    def __init__(self) -> None:
        self.last_fault_us: int | None = None
        self.listener: Callable[[int, str, str], None] | None = None

    def mark(self, now_us: int) -> None:
        self.last_fault_us = now_us

    def hit(self, tag: int, what: str, call: str = "") -> None:
        """A fault hit a message of request ``tag`` (or the migration's), of
        the command labelled ``call`` (a script's name, a verb) when known."""
        if self.listener is not None:
            self.listener(tag, what, call)


class _Hops:
    """A cluster call's redirects: where the client sends the next attempt
    (a shard, and whether it asks first; None: by its slots table), the shard
    the last attempt reached, the redirects followed in all (they are no
    retries) and since the last retry (redis-py's per-call TTL)."""

    __slots__ = ("route", "node", "count", "chain")

    def __init__(self) -> None:
        self.route: tuple[int, bool] | None = None
        self.node = 0
        self.count = 0
        self.chain = 0


class _Call:
    __slots__ = ("process", "token", "command", "attempt", "live_attempt", "resolved",
                 "executions", "armed", "hops")

    def __init__(self, process: Process, command: Command) -> None:
        self.process = process
        self.token = process.token
        self.command = command
        self.attempt = 0
        # The attempt whose reply the driver would still read; 0 between a
        # timeout and the retry (redis-py drops the connection on a timeout).
        self.live_attempt = 0
        self.resolved = False
        self.executions = 0
        # Connection faults armed for this call, by kind, with their extra
        # time (``ReplicaNetwork.forced``); None while none is.
        self.armed: dict[str, int] | None = None
        # On a cluster, its redirects (made at its first arrival there).
        self.hops: _Hops | None = None


REFUSED = "CONNREFUSED the server is down"
RESET = "CONNRESET connection reset by peer"
CLOSED = "CONNCLOSED the connection was closed"
ARMED_KINDS = ("stall", "reset", "slow", "drop_waiter")


CLUSTER_ERRORS = frozenset({"CROSSSLOT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"})
"""A cluster node's error codes: redis-py raises its own class for each,
without the code (``ClusterCrossSlotError("Keys in request ...")``)."""
CLUSTER_REQUEST_TTL = 16
"""Attempts redis-py's ``RedisCluster`` gives one call across redirects
(``RedisClusterRequestTTL``) before it raises ``ClusterError("TTL exhausted.")``."""
TRYAGAIN_PAUSE_US = 50_000
"""Its pause before sending again on ``TRYAGAIN``, once half the TTL is spent."""
TTL_EXHAUSTED = "TTL exhausted."


def error_for(message: str) -> Exception:
    """The exception redis-py raises for an error reply."""
    if message.split(" ", 1)[0] in CLUSTER_ERRORS:
        return BaseParser.parse_error(message)
    if message == TTL_EXHAUSTED:
        return ClusterError(TTL_EXHAUSTED)
    if message.startswith(NOSCRIPT.split()[0]):
        return NoScriptError(message)
    if message == REFUSED:
        return RedisConnectionError("Connection refused: the server is restarting")
    if message == RESET:
        return RedisConnectionError("Connection reset by peer")
    if message == CLOSED:
        return RedisConnectionError("Connection closed by the client")
    return ResponseError(message)


def _redirect(outcome: Outcome | Pending) -> bool:
    """Whether a cluster node's reply sends the client elsewhere (or again)."""
    error = outcome.error if isinstance(outcome, Outcome) else None
    return error is not None and error.startswith(REDIRECTS)


def describe(value: object, namespace: str) -> str:
    """A short, backend-independent rendering of a reply for the trace."""
    if value is None:
        return "nil"
    if isinstance(value, list):
        return f"list[{len(value)}]"
    return str(value).removeprefix(namespace)[:60]


class Link:
    """One replica incarnation's pooled connections to the server: each call
    travels on a connection of its own, so its reply can only ever reach its
    own caller (``simulator.net.connections`` has the multiplexed kind)."""

    def __init__(self, kernel: Kernel, server: Server, trace: Trace, owner: Owner,
                 replica: int, incarnation: int, rng: random.Random,
                 settings: LinkSettings, network: ReplicaNetwork | None = None,
                 faults: FaultClock | None = None) -> None:
        self.kernel = kernel
        self.server = server
        self.trace = trace
        self.owner = owner
        self.replica = replica
        self.incarnation = incarnation
        self.rng = rng
        self.settings = settings
        self.network = network or ReplicaNetwork()
        self.faults = faults or FaultClock()
        self.sent = 0
        self.executed = 0
        moved = getattr(server, "moved", None)
        self.known: dict[int, int] | None = None if moved is None else dict(moved)
        """On a cluster, the slots this client knows moved (its slots table
        is the layout when it started, then what ``MOVED`` taught it)."""
        # Called after each command of this link executes (the lab uses it to
        # kill a migration at an exact point).
        self.after_execute: Callable[[], None] | None = None

    def close(self) -> None:
        """Closing a pool closes nothing a later call needs: it opens another."""

    def send(self, process: Process, command: Command) -> None:
        self.sent += 1
        self._attempt(_Call(process, command))

    def _latency(self) -> int:
        return max(0, self.settings.latency.sample(self.rng))

    def _record(self, call: _Call, kind: str, outcome: str = "") -> None:
        self.trace.record(self.kernel.now, self.replica, self.incarnation, call.process.tag,
                          kind, outcome=outcome, detail=call.command.label)
        if kind in MESSAGE_FAULTS:
            label = call.command.label
            if kind == "misaligned_reply":  # the outcome names whose reply it read
                label = f"{label}{ANSWERED}{outcome}"
            self.faults.hit(call.process.tag, kind, label)

    def _held_by_pause(self, callback: object, *args: object) -> bool:
        """The replica's driver runs inside the replica: while it is paused,
        its timers and its reading of replies wait for the pause to end."""
        if self.owner.paused_until > self.kernel.now:
            self.kernel.at(self.owner.paused_until, callback, *args)
            return True
        return False

    def _attempt(self, call: _Call) -> None:
        if not self.owner.alive or self._held_by_pause(self._attempt, call):
            return
        call.attempt += 1
        call.live_attempt = call.attempt
        lost = self.rng.random() < self.settings.request_loss
        latency = self._latency()
        now = self.kernel.now
        if self.network.forced:
            self._arm(call)
        if self._on_its_way(call, lost, now):
            self.kernel.after(latency, self._arrive, call, call.attempt)
        self.kernel.after(self.settings.timeout_us, self._time_out, call, call.attempt)

    def _on_its_way(self, call: _Call, lost: bool, now: int) -> bool:
        """Whether the request leaves for the server: a partition, a scheduled
        loss or the loss draw (``lost``) keeps it from ever arriving."""
        if now < self.network.cut_requests_until:
            self._record(call, "request_lost", "partition")
        elif self.network.take_forced("request", call.command.label):
            self._record(call, "request_lost", "scheduled")
            self.faults.mark(now)
        elif lost:
            self._record(call, "request_lost")
            self.faults.mark(now)
        else:
            return True
        return False

    def _arrive(self, call: _Call, attempt: int) -> None:
        if self.known is None:
            server = self.server.node_for(call.command)
        else:
            hops = call.hops
            if hops is None:
                hops = call.hops = _Hops()
            server = self.server.node_for(call.command, hops.route, self.known)
            hops.node = server.index
        lost = self.rng.random() < self.settings.reply_loss
        latency = self._latency()
        if server.down:
            self._record(call, "call_refused")
            self._reply(call, attempt, Outcome.failed(REFUSED), latency)
            return
        outcome = server.execute(call.command, call.process.tag)
        if self.known is not None and _redirect(outcome):
            self._redirected_here(call, outcome)
        else:
            # The call ran on ``server``: counted and traced (inline: the hot path).
            call.executions += 1
            self.executed += 1
            if call.executions > 1:
                self._record(call, "duplicate_execution", str(call.executions))
            row = self.trace.record(self.kernel.now, self.replica, self.incarnation,
                                    call.process.tag, "call_executed", outcome=UNKNOWN_YET,
                                    detail=call.command.label)
            when_done(outcome, lambda done: self.trace.set_outcome(
                row, f"error:{done.error.split()[0]}" if done.error
                else describe(done.value, server.backend.namespace)))
            if self.after_execute is not None:
                self.after_execute()
            if server is not self.server:  # a cluster's node: did it refuse the call's keys?
                when_done(outcome, lambda done: self._refused_by_cluster(call, done))
        now = self.kernel.now
        if now < self.network.cut_replies_until:
            self._record(call, "reply_lost", "partition")
        elif self.network.take_forced("reply", call.command.label):
            self._record(call, "reply_lost", "scheduled")
            self.faults.mark(now)
        elif lost:
            self._record(call, "reply_lost")
            self.faults.mark(now)
        elif call.armed is None:
            self._reply(call, attempt, outcome, latency + server.extra_latency_us)
        else:
            self._armed_reply(call, attempt, outcome, latency + server.extra_latency_us)

    def _redirected_here(self, call: _Call, outcome: Outcome) -> None:
        """Nothing ran: the node sends the client elsewhere (or again)."""
        assert outcome.error is not None
        self.trace.record(self.kernel.now, self.replica, self.incarnation, call.process.tag,
                          "call_redirected", outcome=outcome.error.split(" ", 1)[0],
                          detail=call.command.label)

    def _refused_by_cluster(self, call: _Call, outcome: Outcome) -> None:
        if outcome.error is not None and outcome.error.startswith(CLUSTER_REFUSALS):
            self._record(call, "cluster_refused")

    def _reply(self, call: _Call, attempt: int, outcome: Outcome | Pending,
               delay_us: int) -> None:
        """Send the reply back: it reaches the caller ``delay_us`` from now."""
        self.kernel.after(delay_us, self._deliver, call, attempt, outcome)

    def _arm(self, call: _Call) -> None:
        """Take the connection faults scheduled for this call (``CONNECTION_FAULTS``)."""
        label = call.command.label
        for kind in ARMED_KINDS:
            entry = self.network.take_forced_entry(kind, label)
            if entry is not None:
                if call.armed is None:
                    call.armed = {}
                call.armed[kind] = entry[3] if len(entry) > 3 else 0
                self.faults.mark(self.kernel.now)

    def _armed_reply(self, call: _Call, attempt: int, outcome: Outcome | Pending,
                     delay_us: int) -> None:
        """A reply whose connection a fault hits. On a pooled connection only
        this call's caller is affected: a reset answers it with an error, a
        stall or a dropped waiter leaves it to time out, a slow reply comes late."""
        armed = call.armed
        assert armed is not None
        if "reset" in armed:
            self._record(call, "connection_reset")
            self._reply(call, attempt, Outcome.failed(RESET), delay_us)
        elif "stall" in armed:
            self._record(call, "connection_stalled")
        elif "drop_waiter" in armed:
            self._record(call, "waiter_dropped")
        else:
            self._record(call, "slow_reply", str(armed["slow"]))
            self._reply(call, attempt, outcome, delay_us + armed["slow"])

    def _deliver(self, call: _Call, attempt: int, outcome: Outcome | Pending) -> WakeUp | None:
        """The reply reaches the caller: the wake-up with its value or error."""
        if self._held_by_pause(self._deliver, call, attempt, outcome):
            return None
        if call.resolved or attempt != call.live_attempt:
            self._record(call, "late_reply")
            return None
        if not self.owner.alive:
            call.resolved = True
            self._record(call, "reply_to_dead_replica")
            return None
        if isinstance(outcome, Pending):
            if outcome.outcome is None:
                self.server.flush()  # the caller reads the reply: run what is queued
            outcome = outcome.outcome
        if outcome.error is not None and self.known is not None and _redirect(outcome):
            followed = self._redirected(call, outcome.error)
            if followed is None:
                return None
            outcome = followed
        call.resolved = True
        if outcome.error is not None:
            return (call.process, call.token, None, error_for(outcome.error))
        return (call.process, call.token, outcome.value, None)

    def _redirected(self, call: _Call, message: str) -> Outcome | None:
        """A cluster node's redirect reached the client. Following it (as
        redis-py's ``RedisCluster`` does), the client sends the call again:
        to the node an ``ASK`` names, with ``ASKING`` first; by its slots
        table, taught by a ``MOVED``; to the same node on ``TRYAGAIN`` (after
        a pause once half the call's TTL is spent), and None is returned.
        The caller gets an error instead (returned) from a client that does
        not follow, or once the call's TTL is spent."""
        code = message.split(" ", 1)[0]
        if not self.settings.follows_redirects:
            self._record(call, "cluster_refused", code)
            return Outcome.failed(message)
        hops = call.hops
        assert hops is not None  # it reached a cluster's node
        hops.chain += 1
        if hops.chain >= CLUSTER_REQUEST_TTL:
            # The cluster could not serve it (a slot kept moving under it):
            # unavailable, as a server that refuses connections is.
            self._record(call, "call_refused", TTL_EXHAUSTED)
            return Outcome.failed(TTL_EXHAUSTED)
        target = redirected_to(message)
        pause_us = 0
        if target is None:
            hops.route = (hops.node, False)
            if CLUSTER_REQUEST_TTL - hops.chain < CLUSTER_REQUEST_TTL / 2:
                pause_us = TRYAGAIN_PAUSE_US
        elif code == "ASK":
            hops.route = (self.server.index_at(target[2]), True)
        else:
            assert self.known is not None
            self.known[target[1]] = self.server.index_at(target[2])
            hops.route = None
        hops.count += 1
        # Read, this attempt is over: no timeout runs while the client pauses
        # before the next one (redis-py times each read, not the call).
        call.live_attempt = 0
        self.kernel.after(pause_us, self._attempt, call)
        return None

    def _time_out(self, call: _Call, attempt: int) -> WakeUp | None:
        """The caller's timeout: a retry, or the wake-up with the driver's error."""
        if call.resolved or attempt != call.live_attempt or not self.owner.alive:
            return None
        if self._held_by_pause(self._time_out, call, attempt):
            return None
        call.live_attempt = 0
        failures = call.attempt
        if call.hops is not None:
            call.hops.route, call.hops.chain = None, 0  # a retry is the call afresh
            failures -= call.hops.count
        if failures <= self.settings.retries:
            self._record(call, "call_retried", outcome=str(failures))
            self.kernel.after(self._backoff(failures), self._attempt, call)
            return None
        call.resolved = True
        self._record(call, "call_timed_out")
        return (call.process, call.token, None, RedisTimeoutError("Timeout reading from socket"))

    def _backoff(self, failures: int) -> int:
        settings = self.settings
        return round(min(settings.backoff_cap_us,
                         self.rng.random() * settings.backoff_base_us * 2**failures))
