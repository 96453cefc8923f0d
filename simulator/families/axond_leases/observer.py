"""Feeding the lease oracle a server's lease hashes, exactly and without disturbing them.

The server returns, after each command, the post-state of every key the
command declared (``simulator.backends.virtual_expiry``): for a lease hash
the fields its hash verbs named (``fields``: the lease ids the script
reclaimed, wrote or released), or the whole hash, or ``same`` for a hash it
only read. This module maps those Redis keys back to lease keys with the
store kind's own layout (``ledger_keys``/``decode``), keeps a decoded mirror
of every hash, and hands the oracle what changed, lease by lease. Key
expiry, restores and eviction arrive the same way, with their cause. At the
end of a run ``check`` compares the oracle's books with the server.

Leases are never kept in a replica's memory, so the replica-side observer
(``NoReplicaStores``) has nothing to follow.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.kernel import SimulationError
from simulator.families.axond_leases.books import NO_REQUEST, Key
from simulator.families.axond_leases.oracle import LeaseOracle
from simulator.net.server import Server
from stores.registry import StoreKind

ROLE = "leases"
"""The role of a lease hash in a lease kind's layout."""

Changes = dict[str, int | None]
"""Lease id to its deadline (epoch ms), ``None`` for a lease removed."""


def lease_layout(kind: StoreKind, settings: Any, keys: list[Key]) -> dict[str, Key]:
    """Every Redis key a lease kind keeps hashes in: ``{redis_key: key}``."""
    assert kind.ledger_keys is not None
    layout = {}
    for key in keys:
        for redis_key, role in kind.ledger_keys(settings, kind.contract.LeaseKey(*key)).items():
            if role == ROLE:
                layout[redis_key] = key
    return layout


class LeaseObserver:
    """Decodes lease hashes' post-states for the lease oracle."""

    def __init__(self, oracle: LeaseOracle, layouts: list[tuple[StoreKind, Any]],
                 keys: list[Key]) -> None:
        self.oracle = oracle
        self.layouts = layouts
        self.key_of: dict[str, Key] = {}
        self.decode: dict[str, Any] = {}
        for kind, settings in layouts:
            for redis_key, key in lease_layout(kind, settings, keys).items():
                self.key_of[redis_key] = key
                self.decode[redis_key] = kind.decode
        # Every lease hash as the backend holds it, decoded. The mirror is
        # complete because every change to a followed key reaches this
        # observer (commands, expiry, eviction, restores) and every run
        # starts empty; ``check`` compares the books with the backend.
        self.hashes: dict[str, dict[str, int]] = {}

    def attach(self, server: Any) -> None:
        """It reads post-states only: nothing of the server to keep."""

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        """A command ran; ``observed`` holds ``[key, type(, value)]``,
        ``[key, "fields", [name, value or None, ...]]`` or ``[key, "same"]`` entries."""
        for entry in observed:
            redis_key = entry[0]
            if redis_key not in self.key_of:
                continue
            kind = entry[1]
            if kind == "same":
                changes: Changes = {}
            elif kind == "fields":
                changes = self._fields(redis_key, entry[2])
            else:
                changes = self._replaced(redis_key, entry[2] if len(entry) > 2 else None)
            self.oracle.observe(self.key_of[redis_key], now_us, tag, "command", changes)

    def _fields(self, redis_key: str, named: list) -> Changes:
        """The changes a hash verb's named fields make to the mirror."""
        mirror = self.hashes.setdefault(redis_key, {})
        written = {}
        changes: Changes = {}
        for name, value in zip(named[::2], named[1::2], strict=True):
            if value is None:
                if name in mirror:
                    changes[name] = None
                    del mirror[name]
            else:
                written[name] = value
        for name, deadline in self.decode[redis_key](ROLE, written).items():
            if mirror.get(name) != deadline:
                changes[name] = mirror[name] = deadline
        if not mirror:
            del self.hashes[redis_key]
        return changes

    def _replaced(self, redis_key: str, raw: Any) -> Changes:
        """The changes from the mirror to a whole hash's new content."""
        old = self.hashes.pop(redis_key, {})
        new = self.decode[redis_key](ROLE, raw) or {}
        if new:
            self.hashes[redis_key] = dict(new)
        changes: Changes = {name: None for name in old.keys() - new.keys()}
        changes.update({name: deadline for name, deadline in new.items()
                        if old.get(name) != deadline})
        return changes

    def dropped(self, redis_keys: list[str], now_us: int, how: str) -> None:
        """Keys vanished without a command: expired, evicted."""
        for redis_key in redis_keys:
            if redis_key in self.key_of:
                self.oracle.observe(self.key_of[redis_key], now_us, NO_REQUEST, how,
                                    self._replaced(redis_key, None))

    def ledger_keys(self) -> list[str]:
        """Every Redis key this observer follows."""
        return list(self.key_of)

    def resync(self, read: dict[str, Any], now_us: int, how: str) -> None:
        """After a restore: every lease hash as read afresh (``read``, by Redis key)."""
        for redis_key, key in self.key_of.items():
            changes = self._replaced(redis_key, read.get(redis_key))
            if changes:
                self.oracle.observe(key, now_us, NO_REQUEST, how, changes)

    def check(self, server: Server) -> None:
        """The oracle's books must be exactly what the backend holds: a lab bug
        otherwise, and the run stops rather than report numbers it cannot vouch for."""
        for kind, settings in self.layouts:
            layout = lease_layout(kind, settings, list(dict.fromkeys(self.key_of.values())))
            held = server.read_ledger_keys(list(layout))
            for redis_key, key in layout.items():
                in_store = kind.decode(ROLE, held[redis_key]) or {}
                book = self.oracle.books.get(key)
                mirrored = {} if book is None else {
                    lease_id: lease.deadline_ms for lease_id, lease in book.leases.items()}
                if in_store != mirrored:
                    raise SimulationError(
                        f"the oracle's record of {key} (leases) is {mirrored!r} but the "
                        f"backend holds {in_store!r} (seed {server.kernel.seed}): a lab bug, "
                        "please report")


class NoReplicaStores:
    """The replica-side observer of a family whose stores all live on a server."""

    def __init__(self, oracle: LeaseOracle) -> None:
        self.oracle = oracle

    def after_call(self, replica: Any, tag: int, touched: Any) -> None:
        """Nothing to read: a lease store keeps nothing in the replica."""

    def check(self, replicas: list[Any]) -> None:
        """Nothing to compare: the server's books are checked by ``LeaseObserver``."""
