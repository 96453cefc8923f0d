"""Feeding the budget oracle a server's record, exactly and without disturbing it.

For Redis stores the server returns, after each command, the post-state of
every key the command declared (see ``backends/virtual_expiry``); this module
maps those Redis keys back to budget keys with the store kind's own layout
(``ledger_keys``/``decode``), keeps them decoded in the shared key mirror
(``simulator.plugin.key_mirror``) and hands the decoded ledgers to the oracle. Key
expiry, data loss and eviction arrive the same way, with their cause. The
lab never sends an extra command for this: observing costs no virtual time
and changes no state. At the end of a run, ``check`` compares the oracle's
books with every ledger key the server holds.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from simulator.families.axond_budget.mirror import compare
from simulator.families.axond_budget.oracle import BudgetOracle, Key
from simulator.net.server import Server
from simulator.plugin.key_mirror import UNCHANGED, KeyMirror, Role, Seen
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


class LedgerObserver(KeyMirror):
    """Decodes ledger keys' post-states for the budget oracle.

    It knows every layout the run uses (a migration moves ledgers from one to
    another), each as its own source of record, so the store's recorded spend
    is the sum over layouts and a carry shows up as a move between sources.
    The key mirror keeps every ledger hash decoded: a command reports only the
    fields it changed (the shim's ``fields``), so only those are decoded, and
    a hold's cost does not grow with the number of holds beside it.
    """

    def __init__(self, oracle: BudgetOracle, layouts: list[tuple[StoreKind, Any]],
                 keys: list[Key]) -> None:
        super().__init__()
        self.oracle = oracle
        self.layouts = layouts
        self.keys = keys
        decode = layouts[0][0].decode
        roles: dict[str, Role] = {}
        self.ledger_of: dict[str, tuple[Key, str, str, str]] = {}
        """Each ledger key's budget key, source, cap scope and part of the ledger."""
        for kind, settings in layouts:
            for redis_key, (key, role) in ledger_layout(kind, settings, keys).items():
                if role not in roles:
                    roles[role] = Role(role, partial(decode, role))
                self.follow(redis_key, roles[role])
                self.ledger_of[redis_key] = (key, source_for(kind), *scope_and_part(role))

    def report(self, seen: list[Seen], now_us: int, tag: int, how: str) -> None:
        """Hand decoded contents to the oracle, one ledger (key, source, scope) at
        a time; a key a command only read is still reported (the oracle notes
        what the store counted when the command ran)."""
        if tag == MIGRATION:
            how = "migration"
        parts: dict[tuple[Key, str, str], dict[str, Any]] = {}
        for redis_key, content, _ in seen:
            key, source, scope, part = self.ledger_of[redis_key]
            decoded = parts.setdefault((key, source, scope), {})
            if content is not UNCHANGED:
                decoded[part] = content
                if (part == "holds" and content and how == "command"
                        and self.kept_without_expiry(redis_key)):
                    self.oracle.holds_without_ttl(key, scope, source, now_us, tag)
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
