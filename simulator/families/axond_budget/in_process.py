"""Feeding the budget oracle the record of stores kept in the replicas.

An in-process store (the in-memory budget) has no server to report its keys'
post-states, so after each call the replica's whole store is read
(``StoreKind.read_ledgers``): a call may change ledgers it did not name (the
in-memory store reclaims expired holds and evicts idle ledgers of other keys
to make room). Every ledger that changed since the last read is reported to
the oracle as the call's doing, a ledger that vanished as emptied, and the
ledger the call named is reported even if unchanged (as a Redis command that
only read a key is: the oracle notes what the store counted when the call
ran). At the end of a run, ``check`` compares the oracle's books with every
live replica's store, key by key.

Rules kept here:

* Each replica incarnation is its own source of record, ``(index, incarnation)``.
* Only what changed is reported, so a call costs one read of the store and a
  comparison, not an oracle update per ledger. The comparison is with the
  oracle's own books (its copy of each source's record), so no second copy
  of every replica's ledgers is kept.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.runtime import EPOCH_MS
from simulator.families.axond_budget.mirror import compare
from simulator.families.axond_budget.oracle import BudgetOracle, Key
from simulator.families.axond_budget.scope_oracle import EVICTED_IN_USE
from simulator.world.fleet import Replica

EMPTY: tuple[int, dict] = (0, {})
"""What a ledger the store does not retain reads as: no spend, no holds."""


class ReplicaLedgers:
    """Follows every replica's in-process budget store for the oracle."""

    def __init__(self, oracle: BudgetOracle) -> None:
        self.oracle = oracle
        self.keys_of: dict[Any, set[Key]] = {}
        """Per source of record, the keys its store held at the last read."""
        self.last_used: dict[tuple[Any, Key], int] = {}
        """When each source's store was last called for each key (a refused
        reserve included): a ledger in use is not idle (seed 001:448-451)."""

    def after_call(self, replica: Replica, tag: int, touched: Key) -> None:
        read = replica.kind.read_ledgers
        if read is None or replica.store is None:
            return
        source = replica.source
        now = replica.kernel.now
        ledgers = _ledgers(read(replica.store))
        observe = self.oracle.observe
        books = self.oracle.subject.books
        idle_ttl_us = getattr(getattr(replica.store, "settings", None), "idle_ttl_ms", None)
        for key in self.keys_of.get(source, set()) - ledgers.keys():
            how = self._vanished(books.get(key), source, now)
            if how == "evicted" and idle_ttl_us is not None and (
                    now - self.last_used.get((source, key), -2**62) <= idle_ttl_us * 1_000):
                how = EVICTED_IN_USE  # evicted while in use: the store's own doing
            observe(key, source, now, tag, how, spent=0, holds={})
        self.last_used[(source, touched)] = now
        for key, (spent, holds) in ledgers.items():
            if key == touched:
                continue
            book = books.get(key)
            if (book is None or book.spent.get(source, 0) != spent
                    or book.holds.get(source, {}) != holds):
                observe(key, source, now, tag, "command", spent=spent, holds=holds)
        spent, holds = ledgers.get(touched, EMPTY)
        observe(touched, source, now, tag, "command", spent=spent, holds=holds)
        self.keys_of[source] = set(ledgers)

    def _vanished(self, book: Any, source: Any, now_us: int) -> str:
        """How a ledger the store no longer holds went: evicted, as the idle
        bound allows, when it held no live hold (seed 001:305-320); a ledger
        dropped with a live hold in it is the store's own doing."""
        holds = book.holds.get(source, {}) if book is not None else {}
        now_ms = EPOCH_MS + now_us // 1_000
        if any(deadline > now_ms for _, deadline in holds.values()):
            return "command"
        return "evicted"

    def check(self, replicas: list[Replica]) -> None:
        for replica in replicas:
            read = replica.kind.read_ledgers
            if read is None or replica.store is None:
                continue
            ledgers = _ledgers(read(replica.store))
            known = {key for key, book in self.oracle.subject.books.items()
                     if replica.source in book.spent or replica.source in book.holds}
            where = f"replica {replica.index}'s store"
            for key in sorted(ledgers.keys() | known):
                spent, holds = ledgers.get(key, EMPTY)
                for part, held, empty in (("spent", spent, 0), ("holds", holds, {})):
                    compare(self.oracle, key, replica.source, "subject", part, held, empty,
                            replica.kernel.seed, what=part, where=where)


def _ledgers(read: dict[Any, Any]) -> dict[Key, tuple[int, dict]]:
    """A store's ledgers by oracle key, each as ``(spent, holds)``."""
    return {(key.namespace, key.subject): (ledger.spent_microdollars, ledger.holds)
            for key, ledger in read.items()}
