"""Feeding the oracle the store's record, exactly and without disturbing it.

For Redis stores the server returns, after each command, the post-state of
every key the command declared (see ``backends/virtual_expiry``); this module
maps those Redis keys back to budget keys with the store kind's own layout
(``ledger_keys``/``decode``) and hands the decoded ledgers to the oracle. Key
expiry, data loss and eviction arrive the same way, with their cause. The
lab never sends an extra command for this: observing costs no virtual time
and changes no state.
"""

from __future__ import annotations

from typing import Any

from simulator.oracle.scoped import BudgetOracle, Key
from stores.registry import StoreKind

SERVER = "server"
"""The source of record of a shared store."""


def scope_and_part(role: str) -> tuple[str, str]:
    """The cap scope and the part of a ledger a role names:
    ``"namespace_holds"`` is the namespace scope's holds, ``"spent"`` the subject's."""
    if role.startswith("namespace_"):
        return "namespace", role.removeprefix("namespace_")
    return "subject", role


class LedgerObserver:
    """Decodes ledger keys' post-states for the budget oracle."""

    def __init__(self, oracle: BudgetOracle, kind: StoreKind, settings: Any,
                 keys: list[Key]) -> None:
        assert kind.ledger_keys is not None and kind.decode is not None
        self.oracle = oracle
        self.decode = kind.decode
        self.role_of: dict[str, tuple[Key, str]] = {}
        for key in keys:
            budget_key = kind.contract.BudgetKey(*key)
            for redis_key, role in kind.ledger_keys(settings, budget_key).items():
                self.role_of[redis_key] = (key, role)

    def executed(self, observed: tuple, now_us: int, tag: int) -> None:
        """A command ran; ``observed`` holds ``[key, type(, value)]`` entries."""
        updates: dict[Key, dict[str, Any]] = {}
        for entry in observed:
            found = self.role_of.get(entry[0])
            if found is not None:
                key, role = found
                updates.setdefault(key, {})[role] = self.decode(role, entry[2] if len(entry) > 2
                                                                else None)
        self._report(updates, now_us, tag, "command")

    def dropped(self, redis_keys: list[str], now_us: int, how: str) -> None:
        """Keys vanished without a command: expired, lost, evicted."""
        updates: dict[Key, dict[str, Any]] = {}
        for redis_key in redis_keys:
            found = self.role_of.get(redis_key)
            if found is not None:
                key, role = found
                updates.setdefault(key, {})[role] = self.decode(role, None)
        self._report(updates, now_us, -1, how)

    def resync(self, read: Any, now_us: int, how: str) -> None:
        """After a restore, read every ledger key afresh (``read(redis_key, role)``)."""
        updates: dict[Key, dict[str, Any]] = {}
        for redis_key, (key, role) in self.role_of.items():
            updates.setdefault(key, {})[role] = self.decode(role, read(redis_key, role))
        self._report(updates, now_us, -1, how)

    def _report(self, updates: dict[Key, dict[str, Any]], now_us: int, tag: int,
                how: str) -> None:
        for key, roles in updates.items():
            by_scope: dict[str, dict[str, Any]] = {}
            for role, value in roles.items():
                scope, part = scope_and_part(role)
                by_scope.setdefault(scope, {})[part] = value
            for scope, parts in by_scope.items():
                self.oracle.observe(key, SERVER, now_us, tag, how, spent=parts.get("spent"),
                                    holds=parts.get("holds"), scope=scope)
