"""The server node: where commands arrive and execute, one at a time.

Rules kept here:

* A command executes atomically, in arrival order, at the virtual time it
  arrives; nothing else runs on the server meanwhile.
* The server owns the *modelled* script cache: ``EVALSHA`` of a script this
  server has not loaded answers ``NOSCRIPT`` (after a restart, say), whatever
  the backend happens to have cached. The backend runs the script body.
* Keys whose virtual TTL has run out are gone before the next command runs.
* Every executed write is kept in ``history`` with its virtual time, so a
  restart can rebuild exactly what its persistence model would have saved
  (see ``restart``); the script cache is never persisted.
* With an ``observer``, every command also reports the post-state of its keys
  to the oracle, and so do expiry, data loss and eviction.
* Replies are values or error messages; the network turns error messages into
  the exceptions redis-py would raise.
* Pipelined (``pipelined=True``), a script's execution is queued instead and
  its outcome is a ``Pending``; the queue goes to the backend as one pipeline
  when a result is needed (``simulator.net.pipeline`` says when, and why the run
  is the same either way). With eviction on, every write is followed by an
  eviction decision that needs the state, so the queue never grows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from simulator.backends import Outcome, RedisBackend
from simulator.backends.redis_backend import sha1
from simulator.backends.slots import REDIRECTS
from simulator.backends.virtual_expiry import GENERIC_COMMAND
from simulator.engine.kernel import Kernel
from simulator.engine.trace import SERVER, Trace
from simulator.net.node import OneNode
from simulator.net.pipeline import EXPIRY_HORIZON_US, Pending

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."
READ_ONLY = frozenset({"GET", "PING", "SCAN", "HGETALL", "EXISTS", "TYPE", "MGET", "HGET"})
MAX_PIPELINE_DEPTH = 1_000
"""Commands per pipeline at most: a bound on the memory a queue can hold."""
SEND_EVERY = 8
"""Queued commands are sent to the backend in groups this size as the queue
grows, so that a real server runs them while the lab simulates on (their
replies are still read only at the flush)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One message to the server: ``verb``, the keys it touches, its arguments
    (already encoded as strings, as a driver sends them) and a trace label."""

    verb: str
    keys: tuple[str, ...]
    args: tuple[str, ...]
    label: str

    @classmethod
    def evalsha(cls, sha: str, keys: tuple[str, ...], args: tuple[str, ...],
                label: str) -> Command:
        return cls("EVALSHA", keys, (sha, *args), label)

    @classmethod
    def script_load(cls, source: str) -> Command:
        return cls("SCRIPT LOAD", (), (source,), "SCRIPT LOAD")

    @classmethod
    def plain(cls, verb: str, *args: str, keys: tuple[str, ...] = ()) -> Command:
        return cls(verb, keys, args, verb)


@dataclass(frozen=True, slots=True)
class Write:
    """An executed command the server would have to persist."""

    time_us: int
    body: str | None  # a script body, None for a plain command, or RESTORED
    keys: tuple[str, ...]
    args: tuple[Any, ...]


RESTORED = "<a key moved in>"
"""The body of a ``Write`` that is a key a slot migration moved in: its
``args`` are the key's ``DUMP`` and its virtual deadline (or None)."""


class Server(OneNode):
    """A Redis server node in the simulation, executing on a backend."""

    def __init__(self, kernel: Kernel, backend: RedisBackend, trace: Trace,
                 observer: Any = None, eviction: Any = None, pipelined: bool = False) -> None:
        self.kernel = kernel
        self.backend = backend
        self.trace = trace
        self.observer = observer
        self.eviction = eviction
        self.script_cache: dict[str, str] = {}
        self.history: list[Write] = []
        self.first_failed: str | None = None
        """The label of the first of the store's scripts (or commands) that
        failed: what exposed its ``script_errors``."""
        self.first_failed_us: int | None = None
        self.down = False
        self.extra_latency_us = 0
        self.spike_ends: list[int] = []
        self.whole: Any = self
        """The server this node is part of: itself, or its cluster."""
        self.keys_expired = 0
        self.redirects = 0
        """Redirects this node answered (a cluster's ``MOVED``, ``ASK``, ``TRYAGAIN``)."""
        self.index = 0
        """This node's shard on a cluster (0 for a server of one node)."""
        self.pipelined = pipelined and eviction is None
        # The queue: scripts to run, their pending outcomes, and every effect
        # that follows them in virtual time, in order.
        self._queued: list[tuple[str, tuple[str, ...], tuple[str, ...], int, bool]] = []
        self._pending: list[Pending] = []
        self._effects: list[tuple[Any, tuple]] = []
        self._queue_started_us = 0
        self._sent = 0  # how many of the queued commands the backend already has
        self.pipelines_sent = 0
        self.pipelined_commands = 0

    def refused(self, label: str) -> None:
        """A call of the store's this node answered with an error without
        running it (a cluster's ``CROSSSLOT``): a script error, the store's."""
        self.backend.script_errors += 1
        self._failed(label)

    def _failed(self, label: str) -> None:
        if self.first_failed is None:
            self.first_failed = label
            self.first_failed_us = self.kernel.now

    def execute(self, command: Command, tag: int = -1) -> Outcome | Pending:
        now_us = self.kernel.now
        if self._queued and now_us >= self._queue_started_us + EXPIRY_HORIZON_US:
            self.flush()
        self.expire_due(now_us)
        verb = command.verb
        if verb == "SCRIPT LOAD":
            source = command.args[0]
            sha = sha1(source)
            self.script_cache[sha] = source
            return Outcome.ok(sha)
        if verb == "SCAN":
            self.flush()
            return Outcome.ok(["0", self._scan(command.args)])
        if verb == "EVALSHA":
            body = self.script_cache.get(command.args[0])
            if body is None:
                return Outcome.failed(NOSCRIPT)
            args = command.args[1:]
            self.history.append(Write(now_us, body, command.keys, args))
            written = True
        else:
            body, args = GENERIC_COMMAND, (verb, *command.args)
            written = verb not in READ_ONLY
            if written:
                self.history.append(Write(now_us, None, command.keys, args))
        entry = (body, command.keys, args, now_us, self.observer is not None)
        if not self.pipelined:
            (outcome,) = self.backend.run_batch([entry])
            if written and outcome.error is not None and outcome.error.startswith(REDIRECTS):
                self.history.pop()  # a real cluster's node redirected it: nothing ran
            self.pipelines_sent += 1  # a round trip of its own
            self.pipelined_commands += 1
            self._executed(outcome, now_us, tag, verb, command.label)
            return outcome
        if not self._queued:
            self._queue_started_us = now_us
        pending = Pending()
        self._queued.append(entry)
        self._pending.append(pending)
        self._effects.append((self._executed_pending,
                              (pending, now_us, tag, verb, command.label)))
        if len(self._queued) >= MAX_PIPELINE_DEPTH:
            self.flush()
        elif len(self._queued) - self._sent >= SEND_EVERY:
            self.backend.submit(self._queued[self._sent:])
            self._sent = len(self._queued)
        return pending

    def after_queued(self, effect: Any, args: tuple) -> None:
        """Apply ``effect(*args)`` after everything queued so far (now, if nothing is)."""
        if self._queued:
            self._effects.append((effect, args))
        else:
            effect(*args)

    def deadline_us(self, redis_key: str) -> int | None:
        """The key's virtual expiry deadline, None when it has no TTL (what an
        observer may read of the server besides post-states)."""
        return self.backend.expiry.deadline_us(redis_key)

    def flush(self) -> None:
        """Run the queued scripts as one pipeline, then their effects in order."""
        if not self._queued:
            return
        queued, pending, effects = self._queued, self._pending, self._effects
        self._queued, self._pending, self._effects = [], [], []
        if self._sent < len(queued):
            self.backend.submit(queued[self._sent:])
        self._sent = 0
        outcomes = self.backend.collect()
        self.pipelines_sent += 1
        self.pipelined_commands += len(queued)
        for waiting, outcome in zip(pending, outcomes, strict=True):
            waiting.resolve(outcome)
        for effect, args in effects:
            effect(*args)

    def _executed_pending(self, pending: Pending, now_us: int, tag: int, verb: str,
                          label: str) -> None:
        assert pending.outcome is not None
        self._executed(pending.outcome, now_us, tag, verb, label)

    def _executed(self, outcome: Outcome, now_us: int, tag: int, verb: str,
                  label: str) -> None:
        """What follows a command's execution: the oracle reads its post-state,
        and a write may make the server evict; the first that failed is kept
        (a cluster's redirect is no failure: nothing ran, and the client may
        follow it)."""
        if outcome.error is not None:
            if outcome.error.startswith(REDIRECTS):
                self.redirects += 1
            else:
                self._failed(label)
        observe = self.observer is not None
        if outcome.observed:
            if self.eviction is not None:
                self.eviction.touched(outcome.observed, now_us)
            if observe:
                self.observer.executed(outcome.observed, now_us, tag)
        if self.eviction is not None and verb not in READ_ONLY:
            self._evict(now_us)

    def _scan(self, args: tuple[str, ...]) -> list[str]:
        """The whole iteration in one reply (cursor 0), sorted: a server may
        answer a SCAN that way, and it keeps the number of messages and the
        key order the same on every backend, whatever else a real server
        holds."""
        options = dict(zip(args[1::2], args[2::2], strict=False))
        return self.backend.keys(options.get("MATCH", "*"))

    def redirected(self, message: str) -> Outcome:
        """This node's answer to a call for a slot it does not serve (or not
        for that call): a redirect, and nothing runs (a command it answered all the
        same: its keys past their deadline are gone first, as before any command)."""
        self.expire_due(self.kernel.now)
        self.redirects += 1
        self.pipelines_sent += 1
        self.pipelined_commands += 1
        return Outcome.failed(message)

    def knows(self, command: Command) -> bool:
        """Whether this node would run ``command`` rather than answer ``NOSCRIPT``."""
        return command.verb != "EVALSHA" or command.args[0] in self.script_cache

    def present(self, redis_keys: tuple[str, ...]) -> tuple[int, int]:
        """How many of the distinct keys this node holds, and how many not
        (what a node counts for a slot being migrated)."""
        self.flush()
        self.expire_due(self.kernel.now)
        distinct = list(dict.fromkeys(redis_keys))
        held = sum(self.backend.read_many([("EXISTS", key) for key in distinct]))
        return held, len(distinct) - held

    def moved_in(self, key: str, payload: bytes, deadline_us: int | None) -> None:
        """A slot migration put ``key`` here: kept, so a restart keeps it too."""
        self.history.append(Write(self.kernel.now, RESTORED, (key,), (payload, deadline_us)))

    def moved_out(self, key: str) -> None:
        """A slot migration took ``key`` away: a restart must not bring it back."""
        self.history.append(Write(self.kernel.now, None, (key,), ("DEL", key)))

    def expire_due(self, now_us: int) -> None:
        """Drop keys whose virtual deadline has come."""
        if self._queued and self.backend.expiry.any_due(now_us):
            self.flush()  # a queued command may have moved or removed a deadline
        expired = self.backend.expire_due(now_us)
        for key in expired:
            self.keys_expired += 1
            self.trace.record(now_us, SERVER, 0, -1, "key_expired",
                              detail=key.removeprefix(self.backend.namespace))
        if expired:
            if self.eviction is not None:
                self.eviction.forget(expired)
            if self.observer is not None:
                self.observer.dropped(expired, now_us, "key_expired")

    # -- faults ------------------------------------------------------------

    def restart(self, keep_until_us: int | None, how: str) -> None:
        """The server loses everything written after ``keep_until_us`` (all of
        it for ``None``) and its script cache; the state it comes back with is
        rebuilt by replaying the writes it had persisted."""
        self.flush()
        now_us = self.kernel.now
        kept = [] if keep_until_us is None else [
            write for write in self.history if write.time_us <= keep_until_us]
        self.backend.wipe()
        # A node's own persistence restores its keys whatever slot moves.
        suspended = getattr(self.whole, "migrator", None)
        if suspended is not None:
            suspended.suspend(self)
        for write in kept:
            self.backend.expire_due(write.time_us)
            if write.body is RESTORED:
                self.backend.restore_key(write.keys[0], *write.args)
            elif write.body is None:
                self.backend.run_command(write.args, write.keys, write.time_us)
            else:
                self.backend.run_script(write.body, write.keys, write.args, write.time_us)
        if suspended is not None:
            suspended.resume(self)
        lost = len(self.history) - len(kept)
        self.history = kept
        self.script_cache.clear()
        self.backend.expire_due(now_us)
        self.trace.record(now_us, SERVER, 0, -1, "server_state_restored",
                          amount=lost, outcome=how)
        if self.eviction is not None:
            self.eviction.reset(self.backend, now_us)
        if self.observer is not None:
            # Read through the whole server: a shard's observer follows every shard's keys.
            self.observer.resync(self.whole.read_ledger_keys(self.observer.ledger_keys()),
                                 now_us, "data_loss")

    READERS = {"string": "GET", "hash": "HGETALL"}
    """How the lab reads a ledger key of each type; other types read as absent."""

    def read_ledger_keys(self, redis_keys: list[str]) -> dict[str, Any]:
        """Keys' contents read by the lab itself (not modelled messages), in two
        pipelines: their types, then their contents."""
        self.flush()
        kinds = self.backend.read_many([("TYPE", key) for key in redis_keys])
        readable = [(key, self.READERS[kind]) for key, kind in zip(redis_keys, kinds, strict=True)
                    if kind in self.READERS]
        values = self.backend.read_many([(verb, key) for key, verb in readable])
        contents = dict.fromkeys(redis_keys)
        contents.update((key, value) for (key, _), value in zip(readable, values, strict=True))
        return contents

    def _evict(self, now_us: int) -> None:
        victims = self.eviction.victims(self.backend.expiry)
        if not victims:
            return
        self.backend.delete(victims)
        for key in victims:
            self.trace.record(now_us, SERVER, 0, -1, "key_evicted",
                              detail=key.removeprefix(self.backend.namespace))
        if self.observer is not None:
            self.observer.dropped(victims, now_us, "evicted")


class Eviction:
    """``maxmemory`` as a key budget: past ``max_keys`` live keys, a write
    evicts per ``policy``, like Redis's eviction pool (exactly, not sampled).
    Access times come from the post-states the server observes."""

    POLICIES = ("allkeys-lru", "allkeys-random", "volatile-lru", "volatile-ttl",
                "volatile-random")

    def __init__(self, max_keys: int, policy: str, rng: random.Random) -> None:
        self.max_keys = max_keys
        self.policy = policy
        self.rng = rng
        self.last_access: dict[str, int] = {}

    def touched(self, observed: tuple, now_us: int) -> None:
        for entry in observed:
            if entry[1] == "none":
                self.last_access.pop(entry[0], None)
            elif entry[1] != "same" or entry[0] in self.last_access:
                # A read key exists exactly when it did before the command.
                self.last_access[entry[0]] = now_us

    def forget(self, keys: list[str]) -> None:
        for key in keys:
            self.last_access.pop(key, None)

    def reset(self, backend: RedisBackend, now_us: int) -> None:
        self.last_access = {key: now_us for key in backend.keys(f"{backend.namespace}*")}

    def victims(self, expiry: Any) -> list[str]:
        excess = len(self.last_access) - self.max_keys
        if excess <= 0:
            return []
        volatile = self.policy.startswith("volatile")
        pool = sorted(key for key in self.last_access
                      if not volatile or expiry.deadline_us(key) is not None)
        if self.policy.endswith("lru"):
            pool.sort(key=lambda key: self.last_access[key])
        elif self.policy == "volatile-ttl":
            pool.sort(key=lambda key: expiry.deadline_us(key))
        else:
            self.rng.shuffle(pool)
        chosen = pool[:excess]
        self.forget(chosen)
        return chosen
