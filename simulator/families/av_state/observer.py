"""Feeding the session-counter oracle the store's record, exactly and without disturbing it.

On a server, every command returns the post-state of the keys it declared
(``simulator.backends.virtual_expiry``): a counter's value, a refund marker,
``same`` for a key it only read, ``none`` for one it deleted.
``CounterObserver`` follows the keys under the store's prefix in the shared
key mirror (``simulator.plugin.key_mirror``) and hands their values to the
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
from simulator.plugin.key_mirror import NO_COMMAND, KeyMirror, Role, Seen


def decoded(raw: Any) -> Any:
    """A string key's raw content: an integer when it is one (a counter, a
    marker's ``1``), else as written; ``None`` for an absent key."""
    if raw is None:
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        return raw


COUNTER = Role("counter", decoded, types=("string",))
"""Every key of the store's, counter or marker: a string (the oracle tells
them apart, knowing every session's keys)."""


class CounterObserver(KeyMirror):
    """Reads a server's counter and marker keys' post-states for the oracle:
    the key mirror follows every key under the store's prefix from its first
    post-state until it expires (a restore may bring back one not expired; an
    expired one never comes back, so a day of five-minute refund markers is
    not re-read at every restore)."""

    def __init__(self, oracle: CounterOracle, layouts: list[tuple[Any, Any]],
                 keys: list[Any]) -> None:
        super().__init__(prefixes=tuple(dict.fromkeys(
            settings.key_prefix for _, settings in layouts)), on_sight=COUNTER)
        self.oracle = oracle

    def _expiry(self, redis_key: str, now_us: int) -> tuple[bool, int | None]:
        """What the server's virtual deadlines say of the key (``attach``):
        whether it has no TTL, and how long it has left to live if it has one."""
        if self.server is None:
            return False, None
        deadline = self.server.deadline_us(redis_key)
        return deadline is None, None if deadline is None else deadline - now_us

    def report(self, seen: list[Seen], now_us: int, tag: int, how: str) -> None:
        """Each key's value, or ``UNCHANGED`` (not written) for one a command
        only read, with whether a key still there is left without an expiry,
        and how long it has left to live."""
        changes = []
        for redis_key, value, _ in seen:
            if value is None:
                changes.append(KeyChange(redis_key, None))
                continue
            no_ttl, expires_in_us = self._expiry(redis_key, now_us)
            if value is UNCHANGED:
                changes.append(KeyChange(redis_key, UNCHANGED, written=False,
                                         expires_in_us=expires_in_us))
            else:
                changes.append(KeyChange(redis_key, value, no_ttl=no_ttl,
                                         expires_in_us=expires_in_us))
        self.oracle.observe(SERVER, now_us, tag, how, changes)

    def resynced(self, seen: list[Seen], now_us: int, how: str) -> None:
        """After a restore: only the keys whose value is not what the books say."""
        changed = [each for each in seen if each[1] != self.held(each[0])]
        if changed:
            self.report(changed, now_us, NO_COMMAND, how)

    def held(self, redis_key: str) -> Any:
        """What the oracle's books say the server holds under ``redis_key``."""
        ledger = self.oracle.ledgers.get((SERVER, redis_key))
        if ledger is not None:
            return ledger.value
        return self.oracle.others.get(SERVER, {}).get(redis_key)

    def check(self, server: Server) -> None:
        """The oracle's books must be exactly what the server holds: a lab bug
        otherwise, and the run stops rather than report numbers it cannot vouch for."""
        for redis_key, raw in server.read_ledger_keys(self.ledger_keys()).items():
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
