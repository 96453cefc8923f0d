"""What a run's server executed, kept in order and run again in-process to
count the store's Lua lines.

A real server cannot tell which lines of a script ran (it has no ``debug``
library), and fakeredis can only with a line hook that slows every script.
So a run asked for its reach keeps a log of everything that changed its
server's keys (``ServerLog``): each script and plain command, as sent and
as answered, and each deletion the lab made (a key's virtual deadline
passed, an eviction, a restart's wipe). Afterwards the log is run again, in
order, on a fresh fakeredis with the line hook (``replayed_lines``): the same
commands on the same keys at the same virtual times give the same replies,
and the hook counts the lines. Every reply is set beside the one the run got;
a reply that differs is counted (``Replayed.diverged``), so a replay that
could not follow the run says so rather than report lines of another run.

On a cluster the nodes share one log, in the order they ran, and it is
replayed on one server: a key lives on one node at a time, so its history is
the same. A slot migration's move is left out (the key stays where the replay
has it); the slot checks a simulated node's shim makes are made again, from
the node's own words, recorded with each call.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from simulator.backends.redis_backend import plain_reply
from simulator.reach.lua_lines import LineHook


@dataclass
class ServerLog:
    """What a run's server executed, in order."""

    entries: list[tuple[Any, ...]] = field(default_factory=list)
    """``("run", body, keys, args, now_us, node, ok, value)``, ``("del", keys)``
    or ``("restore", key, payload)``, keys as on the embedded server."""
    pending: list[tuple[Any, ...]] = field(default_factory=list)
    """Scripts sent and not yet answered (``RedisBackend.submit``)."""

    def sent(self, body: str, keys: tuple[str, ...], args: tuple[str, ...], now_us: int,
             node: str) -> None:
        self.pending.append((body, keys, args, now_us, node))

    def answered(self, ran: list[tuple[bool, Any] | None]) -> None:
        """The replies to what was sent, in order: ``(ok, value)``, or None
        where the server ran nothing (a real node's redirect)."""
        pending, self.pending = self.pending, []
        for sent, reply in zip(pending, ran, strict=True):
            if reply is not None:
                self.entries.append(("run", *sent, *reply))

    def deleted(self, keys: list[str]) -> None:
        if keys:
            self.entries.append(("del", tuple(keys)))

    def restored(self, key: str, payload: bytes) -> None:
        self.entries.append(("restore", key, payload))


@dataclass(frozen=True)
class Replayed:
    """The lines of each store script the replay ran, and how faithful it was."""

    lines: dict[str, set[int]]
    """Per script body, its lines that ran (1 = its first)."""
    calls: int
    diverged: int
    """Calls whose reply differed from the run's (0: the replay is the run)."""
    state: str = ""
    """A digest of every reply the run's server gave and every key it held at
    the end (type, value, virtual deadline): two runs with the same digest
    were the same to the store's server (``mutate``'s equivalence)."""


def replayed_lines(log: ServerLog, bodies: list[str]) -> Replayed:
    """Run ``log`` again on a fresh fakeredis, counting the lines of ``bodies``
    (a plain command's lines, or a script's that is not the store's, are not)."""
    import fakeredis

    from simulator.backends.redis_backend import EMBEDDED_NAMESPACE, RedisBackend

    server = fakeredis.FakeServer()
    client = fakeredis.FakeRedis(server=server, decode_responses=True)
    hook = LineHook(client, server)
    reached: dict[str, set[int]] = {body: set() for body in bodies}
    backend = RedisBackend(client, "fakeredis", namespace=EMBEDDED_NAMESPACE,
                           owns_server=True, shim_preloaded=True)
    node = [""]
    backend._node_of = lambda keys: node[0]  # the recorded node's words, not the replay's
    calls = diverged = 0
    try:
        for entry in log.entries:
            if entry[0] == "run":
                _, body, keys, args, now_us, node[0], ok, value = entry
                (outcome,) = backend.run_batch([(body, keys, args, now_us, False)])
                lines = hook.take()
                if body in reached:
                    reached[body] |= lines
                calls += 1
                if (outcome.error is None) != ok or (ok and plain_reply(outcome.value) != value):
                    diverged += 1
            elif entry[0] == "del":
                client.delete(*entry[1])
            else:
                _, key, payload = entry
                try:
                    client.restore(key, 0, payload, replace=True)
                except Exception:  # noqa: BLE001 -- another server's DUMP format
                    diverged += 1
        state = _state_digest(log, client, backend.expiry)
    finally:
        client.close()
    return Replayed(reached, calls, diverged, state)


def key_value(client: Any, key: str) -> tuple[str, Any]:
    """A key's type and value, in an order that compares."""
    kind = client.type(key)
    value = {"string": client.get, "hash": lambda name: sorted(client.hgetall(name).items()),
             "set": lambda name: sorted(client.smembers(name)),
             "list": lambda name: client.lrange(name, 0, -1),
             "zset": lambda name: client.zrange(name, 0, -1, withscores=True),
             }.get(kind, lambda name: None)(key)
    return kind, value


def _state_digest(log: ServerLog, client: Any, expiry: Any) -> str:
    replies = [entry[6:] for entry in log.entries if entry[0] == "run"]
    keys = [(key, key_value(client, key), expiry.deadline_us(key))
            for key in sorted(client.scan_iter(count=1000))]
    return hashlib.sha1(repr((replies, keys)).encode()).hexdigest()[:16]


