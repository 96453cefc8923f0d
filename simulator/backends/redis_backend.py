"""Executing store commands on fakeredis or on a real ``redis-server``.

Rules kept here:

* Every command, scripted or plain, runs as one wrapped script (see
  ``virtual_expiry``): atomic on the server, and with key TTLs kept in
  virtual time. Expired keys are deleted before the command that would first
  see them.
* Where the server allows it, the wrapped scripts are functions of the run's
  own library (``functions_library``), called by FCALL; elsewhere they go by
  EVALSHA. Both give the same replies.
* The lab's client runs with retries off: the only duplicate executions are
  the ones the network model injects.
* The lab works under its own key prefix (``namespace``) and, on a server it
  did not start, deletes only keys under that prefix; it never flushes one.
* A failure of the lab's own connection is not a modelled fault: it stops the
  run.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import hiredis
import redis
from redis.client import NEVER_DECODE
from redis.exceptions import AskError, MovedError, NoScriptError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.utils import HIREDIS_AVAILABLE

from simulator.backends.functions_library import FunctionsLibrary
from simulator.backends.slots import RUN_PREFIX, TRYAGAIN, ask, moved, slot_of
from simulator.backends.virtual_expiry import (
    GENERIC_COMMAND,
    SENTINEL_TTL_MS,
    STATUS_ERROR,
    STATUS_VALUE,
    VirtualExpiry,
    wrap,
    wrap_preloaded,
)

ABSENT = {"TYPE": "none", "EXISTS": 0, "DEL": 0, "HGETALL": {}}
"""What the lab's read of a key no longer there says (GET, DUMP...: None)."""
MIGRATE_TIMEOUT_MS = 5_000
"""How long a real node's ``MIGRATE`` may take to hand one key over."""


class BackendError(RuntimeError):
    """The lab lost its own backend (not a modelled fault)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the server answered: a value, or an error reply's message; and,
    when asked for, the post-state of the command's keys (``observed``)."""

    value: Any = None
    error: str | None = None
    observed: tuple = ()

    @classmethod
    def ok(cls, value: Any, observed: tuple = ()) -> Outcome:
        return cls(value=value, observed=observed)

    @classmethod
    def failed(cls, message: str, observed: tuple = ()) -> Outcome:
        return cls(error=message, observed=observed)


def _renamed(value: Any, rename: Any) -> Any:
    """A reply with the run's namespace in its strings named as on the embedded server."""
    if isinstance(value, str):
        return rename(value)
    if isinstance(value, list | tuple):
        return [_renamed(item, rename) for item in value]
    return value


def plain_reply(value: Any) -> Any:
    """A reply as the reach's log keeps it: lists as tuples, so replies compare."""
    if isinstance(value, list | tuple):
        return tuple(plain_reply(item) for item in value)
    return value


def sha1(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


def _lost_scripts(error: Exception) -> bool:
    """Whether a reply says the server no longer has the lab's script or function."""
    return isinstance(error, NoScriptError) or str(error).startswith("Function not found")


SCRIPT_ERRORS = "script_errors"
"""The summary's count of error replies the server gave the store's own
scripts (and plain commands): the lab's faults act on links and replicas,
never inside a script, so each is the store's (an invariant of every kind on
Redis: ``simulator.families.SCRIPT_ERRORS_INVARIANT``)."""

EMBEDDED_NAMESPACE = RUN_PREFIX
"""Where an embedded fakeredis keeps a run's keys: the whole server is the run's."""


class RedisBackend:
    """A Redis (fake or real) with virtual-time key expiry."""

    def __init__(self, client: redis.Redis, name: str, namespace: str,
                 owns_server: bool, shim_preloaded: bool = False,
                 library: FunctionsLibrary | None = None, mark_key: str | None = None) -> None:
        self.client = client
        self.served_slots: range | None = None
        """On a cluster (simulated or real), the slots this backend's node
        serves: a script's undeclared keys are checked against them, and one
        command's keys must share a slot."""
        self.gained_slot = self.lost_slot = self.migrating_slot = -1
        """After or during a slot migration (``simulator.net.slot_migration``):
        a slot this node serves besides its range, one it no longer serves,
        and one it is migrating away, whose keys the shim checks as Redis
        does (on a simulated node; a real one checks them itself)."""
        self.asking_slot: int | None = None
        """Set for one call a cluster client sends with ``ASKING`` first:
        the slot it is importing serves that call."""
        self.native_cluster = False
        """A real cluster's node: it answers redirects itself and moves keys
        with ``MIGRATE``; ``address`` and ``node_id`` name it."""
        self.address = ""
        self.node_id = ""
        self.lab_names: dict[str, str] = {}
        """A real node's peers' addresses, by the names the lab gives shards
        (``shard-K:6379``), so a redirect reads the same on every backend."""
        self.name = name
        self.namespace = namespace
        self.owns_server = owns_server
        self.wrap = wrap_preloaded if shim_preloaded else wrap
        self.expiry = VirtualExpiry()
        self.executed = 0
        self.store_commands = 0  # commands run by store scripts themselves (not the shim)
        self.script_errors = 0  # error replies to the store's own scripts and commands
        self.backend_seconds = 0.0  # wall time spent waiting on the backend for scripts
        self.library = library
        self.mark_key = mark_key
        """The run's mark on a server it did not start (``run_marks``): removed last."""
        self.closed_with: Any = None
        """Called last by ``close``: a leased server of the lab's engine goes back."""
        # How each body is called, once known: ("FCALL", function) or ("EVALSHA", sha).
        self._calls: dict[str, tuple[str, str]] = {}
        # When a list: every script run is appended as (body, keys, args), keys
        # without this run's namespace, so a benchmark can replay the same work
        # straight to another backend.
        self.recording: list[tuple[str, tuple[str, ...], tuple[str, ...]]] | None = None
        self.reach_log: Any = None
        """A run asked for its reach keeps here what the server executed
        (``simulator.reach.replay.ServerLog``), to replay it for the lines."""
        # Scripts go out on one connection of their own, in order, and their
        # replies are read later (``submit``/``collect``); ``_in_flight`` holds
        # the virtual time of each script sent and not yet read.
        self._connection = client.connection_pool.get_connection()
        self._in_flight: list[int | None] = []

    def as_embedded(self, text: str) -> str:
        """``text`` (a store's message, naming its keys) as a run on the
        embedded fakeredis says it: a real server's run-specific namespace
        never enters the trace, so the same seed gives the same fingerprint
        on every backend."""
        return text.replace(self.namespace, EMBEDDED_NAMESPACE)

    # -- execution --------------------------------------------------------

    def expire_due(self, now_us: int) -> list[str]:
        """Delete every key whose virtual deadline has been reached."""
        due = self.expiry.due(now_us)
        if due:
            self._idle()
            self._delete_keys(due)
            if self.reach_log is not None:
                self.reach_log.deleted(due)
        return due

    def run_script(self, body: str, keys: tuple[str, ...], args: tuple[str, ...],
                   now_us: int, observe: bool = False) -> Outcome:
        """Run ``body`` atomically at virtual time ``now_us``; with ``observe``,
        also return the post-state of its keys."""
        return self.run_batch([(body, keys, args, now_us, observe)])[0]

    def run_batch(self, batch: list[tuple[str, tuple[str, ...], tuple[str, ...], int, bool]]
                  ) -> list[Outcome]:
        """Run scripts ``(body, keys, args, now_us, observe)`` in order, in one
        round trip (a pipeline, not a transaction: each is atomic on its own,
        as when sent one by one), and return their outcomes in order."""
        self.submit(batch)
        return self.collect()

    def submit(self, batch: list[tuple[str, tuple[str, ...], tuple[str, ...], int, bool]]
               ) -> None:
        """Send scripts ``(body, keys, args, now_us, observe)`` now, in order,
        without waiting for their replies: a real server runs them while the
        lab goes on (on the other core), and ``collect`` reads the replies.
        Nothing else may reach the backend until then (``_idle``): the order
        of execution is the order of sending."""
        calls = self._calls
        node = self._node_of
        commands = [(*(calls.get(body) or self._call_of(body)), len(keys), *keys, *args,
                     node(keys), "1" if observe else "0")
                    for body, keys, args, _, observe in batch]
        if self.asking_slot is not None and self.native_cluster:
            commands.insert(0, ("ASKING",))
            self._in_flight.append(None)  # its +OK is read and dropped
        if self.reach_log is not None:
            self._log_sent(batch)
        if self.recording is not None:
            namespace = self.namespace
            self.recording.extend(
                (body, tuple(key.removeprefix(namespace) for key in keys), args)
                for body, keys, args, _, _ in batch)
        connection = self._connection
        # Where redis-py packs with hiredis, the lab calls hiredis itself: the
        # same bytes for every argument it sends (str, int, bytes; checked in
        # test_pipelining) without redis-py's Python per argument.
        packed = ([b"".join(map(hiredis.pack_command, commands))] if HIREDIS_AVAILABLE
                  else connection.pack_commands(commands))
        started = time.perf_counter()
        try:
            self._guarded(connection.send_packed_command, packed, check_health=False)
        finally:
            self.backend_seconds += time.perf_counter() - started
        self._in_flight.extend(now_us for _, _, _, now_us, _ in batch)

    def _log_sent(self, batch: list[tuple[str, tuple[str, ...], tuple[str, ...], int, bool]]
                  ) -> None:
        """Keep what ``submit`` sends for the reach's replay, named as on the
        embedded server, with what a simulated node's shim checks keys against."""
        embedded = self.namespace != EMBEDDED_NAMESPACE
        rename = self.as_embedded
        for body, keys, args, now_us, _ in batch:
            node = self._node_of(keys)
            if embedded:
                keys, args = tuple(map(rename, keys)), tuple(map(rename, args))
            self.reach_log.sent(body, keys, args, now_us, node)

    def collect(self) -> list[Outcome]:
        """The outcomes of every script ``submit`` sent, in order."""
        in_flight, self._in_flight = self._in_flight, []
        started = time.perf_counter()
        try:
            replies = [self._guarded(self._reply) for _ in in_flight]
        finally:
            self.backend_seconds += time.perf_counter() - started
        outcomes = self._outcomes(in_flight, replies)
        if self.reach_log is not None:
            self._log_answered(in_flight, replies, outcomes)
        return outcomes

    def _log_answered(self, in_flight: list[int | None], replies: list[Any],
                      outcomes: list[Outcome]) -> None:
        """Pair the replies with what ``_log_sent`` kept: a redirect ran nothing."""
        answered = iter(outcomes)
        ran: list[tuple[bool, Any] | None] = []
        for now_us, packed in zip(in_flight, replies, strict=True):
            if now_us is None:
                continue
            outcome = next(answered)
            if isinstance(packed, AskError | TryAgainError):
                ran.append(None)
            else:
                value = outcome.value
                if self.namespace != EMBEDDED_NAMESPACE:
                    value = _renamed(value, self.as_embedded)
                ran.append((outcome.error is None, plain_reply(value)))
        self.reach_log.answered(ran)

    def _outcomes(self, in_flight: list[int | None], replies: list[Any]) -> list[Outcome]:
        """The replies read for the scripts in flight, as outcomes."""
        outcomes = []
        for now_us, packed in zip(in_flight, replies, strict=True):
            if now_us is None:
                continue  # an ASKING's reply
            if isinstance(packed, AskError | TryAgainError):
                # A real node's redirect: not the store's error, nothing ran.
                outcomes.append(Outcome.failed(self._redirect_text(packed)))
                continue
            if isinstance(packed, Exception):
                if _lost_scripts(packed):
                    raise BackendError(f"the {self.name} backend lost the lab's scripts mid-run "
                                       "(SCRIPT FLUSH or FUNCTION FLUSH?): the run cannot be "
                                       "trusted")
                # The shim catches script errors itself; this is one it could not.
                message = str(packed)
                self.script_errors += 1
                outcomes.append(Outcome.failed(
                    self.library.plain(message) if self.library else message))
                continue
            self.executed += 1
            status, calls, ttl_pairs, key_states, observed = packed[:5]
            self.store_commands += calls
            self.expiry.apply(now_us, ttl_pairs, key_states)
            observed = tuple(observed)
            if status == STATUS_ERROR:
                self.script_errors += 1
                outcomes.append(Outcome.failed(packed[5], observed))
            else:
                outcomes.append(Outcome.ok(packed[5] if status == STATUS_VALUE else None,
                                           observed))
        return outcomes

    def _node_of(self, keys: tuple[str, ...]) -> str:
        """What the shim checks a script's keys against on a cluster's node
        (see ``virtual_expiry``): the script's slot (-1 without keys), the
        node's slots, and those a slot migration changed; '' elsewhere."""
        served = self.served_slots
        if served is None:
            return ""
        slot = slot_of(keys[0]) if keys else -1
        gained = self.gained_slot if self.asking_slot is None else self.asking_slot
        return (f"{slot}:{served.start}:{served.stop - 1}:{gained}:{self.lost_slot}:"
                f"{self.migrating_slot}")

    def _redirect_text(self, error: AskError | TryAgainError) -> str:
        """A real node's redirect as the lab words it: the node named as the
        lab names its shard (the address differs from run to run)."""
        if isinstance(error, TryAgainError):
            return TRYAGAIN
        address = self.lab_names.get(f"{error.host}:{error.port}", f"{error.host}:{error.port}")
        if isinstance(error, MovedError):
            return moved(error.slot_id, address)
        return ask(error.slot_id, address)

    def _reply(self) -> Any:
        try:
            return self._connection.read_response()
        except ResponseError as error:
            return error

    def _idle(self) -> None:
        """Anything but ``submit`` goes through another connection, so it must
        wait until every script sent is done, or it could run before them."""
        if self._in_flight:
            raise BackendError(f"{len(self._in_flight)} scripts still in flight: the lab "
                               "must collect them before anything else (a lab bug)")

    def _call_of(self, body: str) -> tuple[str, str]:
        """How ``body`` is called: its library function, loaded now if new;
        or, where the server refused the library, its wrapped script's SHA."""
        function = self._guarded(self.library.function_for, body) if self.library else None
        call = (("FCALL", function) if function is not None
                else ("EVALSHA", self._guarded(self.client.script_load, self.wrap(body))))
        self._calls[body] = call
        return call

    def run_command(self, args: tuple[str, ...], keys: tuple[str, ...],
                    now_us: int, observe: bool = False) -> Outcome:
        """Run one plain command (``GET k``...) through the same shim."""
        return self.run_script(GENERIC_COMMAND, keys, args, now_us, observe)

    def _guarded(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except (RedisConnectionError, RedisTimeoutError, OSError) as error:
            raise BackendError(f"the lab lost its {self.name} backend: {error}") from error

    def delete(self, keys: list[str]) -> None:
        """Drop ``keys`` outright (eviction): no command, no deadline left."""
        self._idle()
        self._delete_keys(keys)
        if self.reach_log is not None:
            self.reach_log.deleted(list(map(self.as_embedded, keys)))
        for key in keys:
            self.expiry.forget(key)

    def wipe(self) -> None:
        """Drop every key of this run (a restarted server's memory)."""
        self._delete_namespace()
        self.expiry = VirtualExpiry()

    def _delete_namespace(self) -> None:
        self._idle()
        batch: list[str] = []
        # The scan whole, inside the guard: a server gone mid-scan is a BackendError.
        found = self._guarded(lambda: list(self.client.scan_iter(match=f"{self.namespace}*",
                                                                  count=1000)))
        if self.reach_log is not None:
            self.reach_log.deleted(sorted(map(self.as_embedded, found)))
        for key in found:
            batch.append(key)
            if len(batch) >= 1000:
                self._delete_keys(batch)
                batch.clear()
        if batch:
            self._delete_keys(batch)

    def _delete_keys(self, keys: list[str]) -> None:
        """``DEL`` the keys: in one command, or, on a cluster's node (where
        one command's keys must share a slot), one each, in one pipeline."""
        if self.served_slots is None:
            self._guarded(self.client.delete, *keys)
            return
        self._key_commands([("DEL", key) for key in keys])

    # -- a slot migration's moves ------------------------------------------

    def keys_in_slot(self, slot: int) -> list[str]:
        """The run's keys this node holds in ``slot``, sorted."""
        return [key for key in self.keys(f"{self.namespace}*") if slot_of(key) == slot]

    def move_key(self, key: str, target: RedisBackend) -> bytes | None:
        """Move ``key`` to ``target``'s node as ``MIGRATE`` does (content and
        TTL; its virtual deadline too) and return its ``DUMP``; None when it
        is not here. A real node migrates it itself."""
        self._idle()
        (payload,) = self._key_commands([("DUMP", key)], {NEVER_DECODE: []})
        if payload is None:
            return None
        deadline_us = self.expiry.deadline_us(key)
        if self.native_cluster:
            host, port = target.address.rsplit(":", 1)
            self._guarded(self.client.execute_command, "MIGRATE", host, port, "", 0,
                          MIGRATE_TIMEOUT_MS, "KEYS", key)
            if deadline_us is not None:
                target.expiry.arm(key, deadline_us)
        else:
            # Not in the reach's log: its replay keeps every node's keys in one server.
            target._restore(key, payload, deadline_us)
            self._delete_keys([key])
        self.expiry.forget(key)
        return payload

    def restore_key(self, key: str, payload: bytes, deadline_us: int | None) -> None:
        """Put a moved key here (as the importing node receives it; also when a
        restart replays the move), with the sentinel TTL if it had a deadline."""
        if self.reach_log is not None:
            self.reach_log.restored(self.as_embedded(key), payload)
        self._restore(key, payload, deadline_us)

    def _restore(self, key: str, payload: bytes, deadline_us: int | None) -> None:
        self._idle()
        verb = "RESTORE-ASKING" if self.native_cluster else "RESTORE"
        ttl_ms = SENTINEL_TTL_MS if deadline_us is not None else 0
        self._guarded(self.client.execute_command, verb, key, ttl_ms, payload, "REPLACE")
        if deadline_us is not None:
            self.expiry.arm(key, deadline_us)

    def set_slot(self, slot: int, state: str, node_id: str = "") -> None:
        """``CLUSTER SETSLOT`` on a real node (``IMPORTING``, ``MIGRATING``,
        ``NODE``, or ``STABLE`` without a node); a simulated node keeps its
        state in the fields above."""
        if self.native_cluster:
            self._idle()
            self._guarded(self.client.execute_command, "CLUSTER", "SETSLOT", slot, state,
                          *((node_id,) if node_id else ()))

    # -- reading without disturbing the run --------------------------------

    def read(self, *command: str) -> Any:
        """A read by the lab itself (the oracle): not a modelled message, and
        not counted as store work. Call ``expire_due`` first."""
        return self.read_many([command])[0]

    def read_many(self, commands: list[tuple[str, ...]]) -> list[Any]:
        """``read`` for many commands at once, in one pipeline: the lab reading
        thousands of keys (the end-of-run mirror check, a resync after a
        restore) pays one round trip, not one per key."""
        if not commands:
            return []
        self._idle()
        return self._key_commands(commands)

    def _key_commands(self, commands: list[tuple[str, ...]],
                      options: dict[str, Any] | None = None) -> list[Any]:
        """The lab's own commands on keys, in one pipeline, their replies in
        order. On a real cluster's node each goes with ``ASKING`` (so a slot
        it imports answers), and a key its migrating slot no longer holds
        reads as absent (the node would redirect the lab)."""
        native = self.native_cluster

        def send() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for command in commands:
                if native:
                    pipe.execute_command("ASKING")
                pipe.execute_command(*command, **(options or {}))
            if not native:
                return pipe.execute()
            replies = pipe.execute(raise_on_error=False)[1::2]
            for reply in replies:
                if isinstance(reply, Exception) and not isinstance(reply, AskError | TryAgainError):
                    raise reply
            return [ABSENT.get(command[0]) if isinstance(reply, Exception) else reply
                    for command, reply in zip(commands, replies, strict=True)]

        return self._guarded(send)

    def keys(self, pattern: str) -> list[str]:
        self._idle()
        return sorted(self._guarded(lambda: list(self.client.scan_iter(match=pattern,
                                                                         count=1000))))

    def server_script_seconds(self) -> float | None:
        """Time a real server has spent running scripts (``INFO commandstats``),
        since it started: it includes other clients' scripts on a shared server.
        None on fakeredis, which keeps no such statistics."""
        if self.name == "fakeredis":
            return None
        stats = self._guarded(self.client.info, "commandstats")
        return sum(stats.get(f"cmdstat_{verb}", {}).get("usec", 0)
                   for verb in ("eval", "evalsha", "fcall")) / 1e6

    # -- lifecycle ---------------------------------------------------------

    @property
    def leftovers(self) -> str:
        """What a run that could not clean up leaves on the server, in words."""
        if self.owns_server:
            return ""
        library = f" and its library {self.library.name}" if self.library is not None else ""
        return f"its keys under {self.namespace}{library} stay on {self.name}"

    def close(self) -> None:
        """Remove what the run wrote (only under its own prefix), then disconnect."""
        if self._in_flight:
            # A run that stopped midway: its replies are unread, so the
            # connection must not go back to the pool as it is.
            self._connection.disconnect()
            self._in_flight.clear()
        self.client.connection_pool.release(self._connection)
        try:
            if not self.owns_server:
                self._delete_namespace()
            if self.library is not None:
                self._guarded(self.library.delete)
            if self.mark_key is not None:
                self._guarded(self.client.delete, self.mark_key)
            self.client.close()
        finally:
            if self.closed_with is not None:
                self.closed_with()
