"""Feeding the session-counter oracle the store's record, exactly and without disturbing it.

On a server, every command returns the post-state of the keys it declared
(``simulator.backends.virtual_expiry``): a counter's value, a refund marker,
``same`` for a key it only read, ``none`` for one it deleted.
``CounterObserver`` hands those of keys under the store's prefix to the
oracle, with whether each written counter is left without an expiry (the
server's virtual deadlines say: ``run.py`` gives the observer the server).
Expiry, eviction and restores arrive the same way, with their cause. At the
end of a run ``check`` compares the oracle's books with the server, key by key.

The in-memory twin keeps counters in each replica: ``ReplicaCounters``
reads a replica's whole store after each of its calls
(``StoreKind.read_ledgers``) and reports what changed, with the operation
the lifecycle says the call was; ``check`` compares every live replica's
store with the books.

Rules kept here:

* A key is the store's when it starts with the store's ``key_prefix``
  (which lies under the run's namespace on a shared server); counters and
  markers are told apart by the oracle, which knows every session's keys.
* A read costs the run nothing: no message, no virtual time.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.kernel import SimulationError
from simulator.families.av_state.books import SERVER, UNCHANGED, KeyChange
from simulator.families.av_state.oracle import CounterOracle
from simulator.net.server import Server


def decoded(raw: Any) -> Any:
    """A string key's raw content: an integer when it is one (a counter, a
    marker's ``1``), else as written; ``None`` for an absent key."""
    if raw is None:
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        return raw


class CounterObserver:
    """Reads a server's counter and marker keys' post-states for the oracle."""

    def __init__(self, oracle: CounterOracle, layouts: list[tuple[Any, Any]],
                 keys: list[Any]) -> None:
        self.oracle = oracle
        self.prefixes = tuple(dict.fromkeys(settings.key_prefix for _, settings in layouts))
        self.server: Server | None = None
        """The server whose virtual deadlines say which key has a TTL (``attach``)."""
        self.followed: set[str] = set()
        """Every key of the store's this observer has seen and not seen expire
        (a restore may bring one back)."""

    def attach(self, server: Server) -> None:
        self.server = server

    def _no_ttl(self, redis_key: str) -> bool:
        return self.server is not None and self.server.deadline_us(redis_key) is None

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        """A command ran; ``observed`` holds ``[key, type(, value)]`` or
        ``[key, "same"]`` entries."""
        changes = []
        for entry in observed:
            redis_key = entry[0]
            if not redis_key.startswith(self.prefixes):
                continue
            self.followed.add(redis_key)
            kind = entry[1]
            if kind == "same":
                changes.append(KeyChange(redis_key, UNCHANGED, written=False))
            elif kind == "none":
                changes.append(KeyChange(redis_key, None))
            elif kind == "string":
                changes.append(KeyChange(redis_key, decoded(entry[2]),
                                         no_ttl=self._no_ttl(redis_key)))
            else:
                raise SimulationError(f"the store left {redis_key!r} as a {kind}, not a "
                                      "counter: the lab cannot follow it")
        if changes:
            self.oracle.observe(SERVER, now_us, tag, "command", changes)

    def dropped(self, redis_keys: list[str], now_us: int, how: str) -> None:
        """Keys vanished without a command: expired, evicted."""
        changes = [KeyChange(key, None) for key in redis_keys if key in self.followed]
        if changes:
            self.oracle.observe(SERVER, now_us, -1, how, changes)
        if how == "key_expired":
            # An expired key never comes back by a restore (the write replayed
            # expires again), so it need not be read after one: a day of
            # five-minute refund markers is not re-read at every restore.
            self.followed.difference_update(redis_keys)

    def ledger_keys(self) -> list[str]:
        """Every key this observer follows."""
        return sorted(self.followed)

    def resync(self, read: dict[str, Any], now_us: int, how: str) -> None:
        """After a restore: every followed key as read afresh (``read``, by key)."""
        changes = []
        for redis_key in sorted(self.followed):
            value = decoded(read.get(redis_key))
            if value != self.held(redis_key):
                changes.append(KeyChange(redis_key, value, no_ttl=value is not None
                                         and self._no_ttl(redis_key)))
        if changes:
            self.oracle.observe(SERVER, now_us, -1, how, changes)

    def held(self, redis_key: str) -> Any:
        """What the oracle's books say the server holds under ``redis_key``."""
        ledger = self.oracle.ledgers.get((SERVER, redis_key))
        if ledger is not None:
            return ledger.value
        return self.oracle.others.get(SERVER, {}).get(redis_key)

    def check(self, server: Server) -> None:
        """The oracle's books must be exactly what the server holds: a lab bug
        otherwise, and the run stops rather than report numbers it cannot vouch for."""
        keys = sorted(self.followed)
        for redis_key, raw in server.read_ledger_keys(keys).items():
            if decoded(raw) != self.held(redis_key):
                raise SimulationError(
                    f"the oracle's record of {redis_key!r} is {self.held(redis_key)!r} but the "
                    f"backend holds {raw!r} (seed {server.kernel.seed}): a lab bug, please report")


class ReplicaCounters:
    """Follows every replica's in-memory twin for the oracle."""

    def __init__(self, oracle: CounterOracle) -> None:
        self.oracle = oracle
        self.last_read: dict[Any, dict[str, int]] = {}
        """Each replica incarnation's store as last read: only what differs
        from it (and what the call named) is reported."""

    def after_call(self, replica: Any, tag: int, touched: tuple[str, tuple[str, ...]]) -> None:
        """A call of session ``tag`` returned: ``touched`` is the operation it
        was (``spend``, ``refund``, ``cleanup``) and the counters it named."""
        read = replica.kind.read_ledgers
        if read is None or replica.store is None:
            return
        op, keys = touched
        held = read(replica.store)
        last = self.last_read.get(replica.source, {})
        self.last_read[replica.source] = held
        changed = {key for key in held.keys() | last.keys() if held.get(key) != last.get(key)}
        changes = [KeyChange(key, held.get(key), written=key in changed or key in held)
                   for key in sorted(changed | set(keys))]
        self.oracle.observe(replica.source, replica.kernel.now, tag, "command", changes, op)

    def check(self, replicas: list[Any]) -> None:
        """Every live replica's twin must hold exactly what the books say."""
        for replica in replicas:
            read = replica.kind.read_ledgers
            if read is None or replica.store is None:
                continue
            held = read(replica.store)
            books = {key: ledger.value for key, ledger in
                     self.oracle.of_source(replica.source).items() if ledger.value is not None}
            if held != books:
                differ = sorted(key for key in held.keys() | books.keys()
                                if held.get(key) != books.get(key))
                raise SimulationError(
                    f"the oracle's record of replica {replica.index}'s counters differs from "
                    f"its store at {differ[:3]} (seed {replica.kernel.seed}): a lab bug, "
                    "please report")
