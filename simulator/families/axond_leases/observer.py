"""Feeding the lease oracle a server's lease hashes, exactly and without disturbing them.

The server returns, after each command, the post-state of every key the
command declared (``simulator.backends.virtual_expiry``): for a lease hash
the fields its hash verbs named (``fields``: the lease ids the script
reclaimed, wrote or released), or the whole hash, or ``same`` for a hash it
only read. This module maps those Redis keys back to lease keys with the
store kind's own layout (``ledger_keys``/``decode``), keeps every hash
decoded in the shared key mirror (``simulator.plugin.key_mirror``), and
hands the oracle what changed, lease by lease (lease id to its deadline in
epoch ms, ``None`` for a lease removed). Key expiry, restores and eviction
arrive the same way, with their cause. At the end of a run ``check``
compares the oracle's books with the server.

Leases are never kept in a replica's memory, so the replica-side observer
(``NoReplicaStores``) has nothing to follow.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from simulator.engine.kernel import SimulationError
from simulator.families.axond_leases.books import NO_REQUEST, Key
from simulator.families.axond_leases.oracle import LeaseOracle
from simulator.net.server import Server
from simulator.plugin.key_mirror import KeyMirror, Role, Seen
from stores.registry import StoreKind

ROLE = "leases"
"""The role of a lease hash in a lease kind's layout."""


def lease_layout(kind: StoreKind, settings: Any, keys: list[Key]) -> dict[str, Key]:
    """Every Redis key a lease kind keeps hashes in: ``{redis_key: key}``."""
    assert kind.ledger_keys is not None
    layout = {}
    for key in keys:
        for redis_key, role in kind.ledger_keys(settings, kind.contract.LeaseKey(*key)).items():
            if role == ROLE:
                layout[redis_key] = key
    return layout


class LeaseObserver(KeyMirror):
    """Decodes lease hashes' post-states for the lease oracle: what changed,
    lease by lease (the key mirror keeps every hash decoded)."""

    def __init__(self, oracle: LeaseOracle, layouts: list[tuple[StoreKind, Any]],
                 keys: list[Key]) -> None:
        super().__init__()
        self.oracle = oracle
        self.layouts = layouts
        self.key_of: dict[str, Key] = {}
        for kind, settings in layouts:
            role = Role(ROLE, partial(kind.decode, ROLE))
            for redis_key, key in lease_layout(kind, settings, keys).items():
                self.key_of[redis_key] = key
                self.follow(redis_key, role)

    def report(self, seen: list[Seen], now_us: int, tag: int, how: str) -> None:
        """Each hash's changes (none for a hash a command only read: the oracle
        still judges the request on it); and a hash a command wrote a lease
        to that the server keeps with no expiry."""
        for redis_key, _, changes in seen:
            key = self.key_of[redis_key]
            self.oracle.observe(key, now_us, tag, how, changes)
            if (how == "command" and changes
                    and any(deadline is not None for deadline in changes.values())
                    and self.kept_without_expiry(redis_key)):
                self.oracle.hash_without_ttl(key, now_us, tag)

    def resynced(self, seen: list[Seen], now_us: int, how: str) -> None:
        """After a restore: only the hashes it changed."""
        changed = [each for each in seen if each[2]]
        if changed:
            self.report(changed, now_us, NO_REQUEST, how)

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
