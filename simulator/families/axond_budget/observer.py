"""Feeding the budget oracle a server's record, exactly and without disturbing it.

For Redis stores the server returns, after each command, the post-state of
every key the command declared (see ``backends/virtual_expiry``); this module
maps those Redis keys back to budget keys with the store kind's own layout
(``ledger_keys``/``decode``) and hands the decoded ledgers to the oracle. Key
expiry, data loss and eviction arrive the same way, with their cause. The
lab never sends an extra command for this: observing costs no virtual time
and changes no state. At the end of a run, ``check`` compares the oracle's
books with every ledger key the server holds.
"""

from __future__ import annotations

from typing import Any

from simulator.families.axond_budget.mirror import compare
from simulator.families.axond_budget.oracle import BudgetOracle, Key
from simulator.net.server import Server
from simulator.plugin.protocol import MIGRATION
from stores.registry import StoreKind

SERVER = "server"
"""The source of record of a shared store."""


def source_for(kind: StoreKind) -> str:
    """The source of record of a shared store's layout."""
    return f"{SERVER}:{kind.name}"


def scope_and_part(role: str) -> tuple[str, str]:
    """The cap scope and the part of a ledger a role names:
    ``"namespace_holds"`` is the namespace scope's holds, ``"spent"`` the subject's."""
    if role.startswith("namespace_"):
        return "namespace", role.removeprefix("namespace_")
    return "subject", role


def ledger_layout(kind: StoreKind, settings: Any, keys: list[Key]) -> dict[str, tuple[Key, str]]:
    """Every Redis key a store kind keeps ledgers in: ``{redis_key: (key, role)}``."""
    assert kind.ledger_keys is not None
    layout = {}
    for key in keys:
        for redis_key, role in kind.ledger_keys(settings, kind.contract.BudgetKey(*key)).items():
            layout[redis_key] = (key, role)
    return layout


UNCHANGED = object()
"""The content of a key a command only read."""


class LedgerObserver:
    """Decodes ledger keys' post-states for the budget oracle.

    It knows every layout the run uses (a migration moves ledgers from one to
    another), each as its own source of record, so the store's recorded spend
    is the sum over layouts and a carry shows up as a move between sources.
    """

    def __init__(self, oracle: BudgetOracle, layouts: list[tuple[StoreKind, Any]],
                 keys: list[Key]) -> None:
        self.oracle = oracle
        self.layouts = layouts
        self.keys = keys
        self.decode = layouts[0][0].decode
        self.role_of: dict[str, tuple[Key, str]] = {}
        self.source_of: dict[str, str] = {}
        for kind, settings in layouts:
            for redis_key, found in ledger_layout(kind, settings, keys).items():
                self.role_of[redis_key] = found
                self.source_of[redis_key] = source_for(kind)
        # Every ledger hash, as the backend holds it, already decoded: a
        # command reports only the fields it changed (the shim's ``fields``),
        # so only those are decoded, and a hold's cost does not grow with the
        # number of holds beside it. The mirror is complete because every
        # change to a ledger key reaches this observer (commands, expiry,
        # eviction, restores) and every run starts empty; the end-of-run
        # mirror check compares the books with the backend.
        self.hashes: dict[str, dict[str, Any]] = {}

    def attach(self, server: Any) -> None:
        """It reads post-states only: nothing of the server to keep."""

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        """A command ran; ``observed`` holds ``[key, type(, value)]`` entries,
        ``[key, "fields", [name, value or None, ...]]`` for a hash it changed
        field by field, or ``[key, "same"]`` for a key it only read (still
        reported: the oracle notes what the store counted when the command ran)."""
        how = "migration" if tag == MIGRATION else "command"
        self._report([(entry[0], self._content(entry)) for entry in observed
                      if entry[0] in self.role_of], now_us, tag, how)

    def _content(self, entry: list) -> Any:
        """One post-state entry, decoded as its role reads."""
        redis_key, kind = entry[0], entry[1]
        if kind == "same":
            return UNCHANGED
        role = self.role_of[redis_key][1]
        if kind == "fields":
            mirror = self.hashes.setdefault(redis_key, {})
            changes = entry[2]
            written = {}
            for name, value in zip(changes[::2], changes[1::2], strict=True):
                if value is None:
                    mirror.pop(name, None)
                else:
                    written[name] = value
            mirror.update(self.decode(role, written))
            return mirror
        return self._decoded(redis_key, role, entry[2] if len(entry) > 2 else None)

    def _decoded(self, redis_key: str, role: str, raw: Any) -> Any:
        """A whole key's raw content, decoded; a hash also becomes its mirror."""
        content = self.decode(role, raw)
        if isinstance(content, dict) and content:
            self.hashes[redis_key] = dict(content)
        else:
            self.hashes.pop(redis_key, None)
        return content

    def dropped(self, redis_keys: list[str], now_us: int, how: str) -> None:
        """Keys vanished without a command: expired, lost, evicted."""
        self._report([(redis_key, self._decoded(redis_key, self.role_of[redis_key][1], None))
                      for redis_key in redis_keys if redis_key in self.role_of],
                     now_us, -1, how)

    def ledger_keys(self) -> list[str]:
        """Every Redis key this observer follows."""
        return list(self.role_of)

    def resync(self, read: dict[str, Any], now_us: int, how: str) -> None:
        """After a restore: every ledger key's content as read afresh (``read``,
        by Redis key)."""
        self._report([(redis_key, self._decoded(redis_key, role, read[redis_key]))
                      for redis_key, (_, role) in self.role_of.items()], now_us, -1, how)

    def _report(self, contents: list[tuple[str, Any]], now_us: int, tag: int,
                how: str) -> None:
        """Hand decoded contents to the oracle, one ledger (key, source, scope) at a time."""
        parts: dict[tuple[Key, str, str], dict[str, Any]] = {}
        for redis_key, content in contents:
            key, role = self.role_of[redis_key]
            scope, part = scope_and_part(role)
            decoded = parts.setdefault((key, self.source_of[redis_key], scope), {})
            if content is not UNCHANGED:
                decoded[part] = content
        for (key, source, scope), decoded in parts.items():
            self.oracle.observe(key, source, now_us, tag, how, spent=decoded.get("spent"),
                                holds=decoded.get("holds"), scope=scope)

    def check(self, server: Server) -> None:
        """The oracle's books must be exactly what the backend holds: a lab bug
        otherwise, and the run stops rather than report numbers it cannot vouch for."""
        for kind, settings in self.layouts:
            source = source_for(kind)
            layout = ledger_layout(kind, settings, self.keys)
            held = server.read_ledger_keys(list(layout))
            for redis_key, (key, role) in layout.items():
                scope, part = scope_and_part(role)
                compare(self.oracle, key, source, scope, part,
                        kind.decode(role, held[redis_key]), kind.decode(role, None),
                        server.kernel.seed, what=role)
