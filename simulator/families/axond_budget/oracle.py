"""The budget family's oracle: one ``ScopeOracle`` per cap scope a store enforces.

A subject-capped store has one scope: ``(namespace, subject)``. A store with
a namespace cap as well has a second, ``(namespace, "*")``, with its own cap,
its own record (the namespace counters and holds) and its own overshoot. Each
scope keeps its own books (``ScopeOracle``); a request belongs to one book in
each. Facts from the gateway go to every scope; observations of the store's
record go to the scope their keys belong to.

Metrics of the subject scope keep their plain names; those of the namespace
scope are prefixed ``namespace_``. A denial is *false* only if every scope had
room for the request.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simulator.families.axond_budget.causes import (
    DENIAL_CAUSES,
    NAMESPACE_ABSENT_CAUSES,
    SUBJECT_ABSENT_CAUSES,
)
from simulator.families.axond_budget.scope_oracle import Key, ScopeOracle
from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import BEGAN_KEYS, EXPOSED_BY_SUFFIX, Exposures
from simulator.scenario.model import Scenario
from stores.registry import StoreKind

NAMESPACE = "*"
"""The subject of a namespace scope's book key."""

NAMESPACE_METRICS = (
    "cap_overshoot_", "wrongful_admissions", "keys_over_cap", "true_spend_",
    "recorded_spend_", "conservation_", "holds_leaked", "leaked_hold_", "premature_",
    "denials_caused_by_leaked_holds", "holds_still_leaked_at_end", "keys_total",
    "holds_removed_by_store",
)


class BudgetOracle:
    """The oracle of a budget store: one ``ScopeOracle`` per cap scope."""

    def __init__(self, subject_cap: int | None, namespace_cap: int | None = None,
                 per_replica: bool = False, holds_expire: bool = True,
                 reservation_ttl_ms: int | None = None, fail_open_allowed: bool = True) -> None:
        self.clocks: list = []
        """Every replica's clock, by index (the run fills it as it builds the fleet)."""
        common = {"per_replica": per_replica, "holds_expire": holds_expire,
                  "reservation_ttl_ms": reservation_ttl_ms, "clocks": self.clocks,
                  "fail_open_allowed": fail_open_allowed}
        self.scopes: dict[str, ScopeOracle] = {
            "subject": ScopeOracle(lambda key: subject_cap, **common,
                                   absent_causes=SUBJECT_ABSENT_CAUSES,
                                   cap_setting="subject_cap_microdollars")}
        if namespace_cap is not None:
            self.scopes["namespace"] = ScopeOracle(
                lambda key: namespace_cap, scope_of=lambda key: (key[0], NAMESPACE), **common,
                absent_causes=NAMESPACE_ABSENT_CAUSES, cap_setting="namespace_cap_microdollars")
        self.counts: Counter = Counter()
        self.denial_exposures = Exposures()
        self.hashes_without_ttl: dict[tuple[Key, str, Any], tuple[int, int]] = {}
        """Each holds hash a command left with no expiry: when, and by which request."""
        """False denials blamed on the store, by what exposed them."""
        self.booted: dict[int, int] = {}
        """When each replica's current incarnation booted, by replica index (a
        crash ends the requests of the one before)."""
        self.emptied: dict[Any, int] = {}
        """Each source of record an operator's migration took spend off (the old
        layout), and when it first did."""

    @property
    def subject(self) -> ScopeOracle:
        return self.scopes["subject"]

    # -- facts from the gateway fan out to every scope ------------------------

    def replica_clocks(self, clocks: list) -> None:
        self.clocks[:] = clocks

    def message_fault(self, number: int, what: str, call: str = "") -> None:
        for scope in self.scopes.values():
            scope.message_fault(number, what, call)

    def settings_in_force(self, replica: int, changes: dict[str, Any], now_us: int) -> None:
        """An operator reconfigured ``replica``: each scope judges its requests
        by the cap and the hold TTL it now runs with."""
        for scope in self.scopes.values():
            scope.settings_in_force(replica, changes)

    def arrived(self, number: int, key: Key, estimate: int, actual: int, replica: int,
                now_us: int, booted_us: int | None = None) -> None:
        if booted_us is not None:
            self.booted[replica] = booted_us
        for scope in self.scopes.values():
            scope.arrived(number, key, estimate, actual, replica, now_us)

    def admitted(self, number: int, held: bool, now_us: int) -> None:
        for scope in self.scopes.values():
            scope.admitted(number, held, now_us)

    def denied(self, number: int, reason: str, now_us: int) -> None:
        judged = [scope.denied(number, reason, now_us) for scope in self.scopes.values()]
        if all(had_room for had_room, _ in judged):
            # The first scope whose record refused it says why; none did
            # (the store refused what its own record had room for): its logic.
            blame = next((cause for _, cause in judged if cause is not None), STORE_LOGIC)
            self.counts["false_denials"] += 1
            self.counts[f"false_denials_{reason}"] += 1
            self.counts[f"false_denials_by_{blame}"] += 1
            if blame == STORE_LOGIC:
                # The scope whose record refused it, else the subjects'.
                scope = next((scope for scope, (_, cause) in zip(self.scopes.values(), judged,
                                                                 strict=True)
                              if cause is not None), self.subject)
                self.denial_exposures.add("false_denials", 1, scope.denial_exposure(number))
                request = scope.requests[number]
                self.denial_exposures.parted(
                    now_us, number, f"reserve on replica {request.replica} for request "
                    f"{number}: asked {request.estimate:,}, refused with room for it")

    def completed(self, number: int, now_us: int) -> None:
        for scope in self.scopes.values():
            scope.completed(number, now_us)

    def settled(self, number: int, now_us: int) -> None:
        for scope in self.scopes.values():
            scope.settled(number, now_us)

    def aborted(self, number: int, now_us: int) -> None:
        for scope in self.scopes.values():
            scope.aborted(number, now_us)

    # -- the store's record goes to its own scope ------------------------------

    def observe(self, key: Key, source: Any, now_us: int, tag: int, how: str,
                spent: int | None = None, holds: dict | None = None,
                scope: str = "subject") -> None:
        if scope in self.scopes:
            if how == "command" and self._unfenced(source, tag):
                for each in self.scopes.values():
                    each.unfenced(tag, self.subject.migration_exposure)
            taken = self.scopes[scope].observe(key, source, now_us, tag, how, spent, holds)
            if taken:
                self.emptied.setdefault(source, now_us)
                # A migration took a subject's spend off the old layout: it owes
                # the other scopes their carry of it (seed 000:567-574), wherever
                # it writes it.
                for name, other in self.scopes.items():
                    if name != scope:
                        other.migration_took_elsewhere(key, now_us)
            if how == "command" and self.scopes[scope].settlement_ran(tag):
                # Tell the other scopes: a settlement the store ran in one scope
                # was not lost in another (seed 000:25-27, one script for both).
                for name, other in self.scopes.items():
                    if name != scope:
                        other.settled_elsewhere(tag, now_us)

    def holds_without_ttl(self, key: Key, scope: str, source: Any, now_us: int,
                          tag: int) -> None:
        """A command of request ``tag`` left ``key``'s holds hash (in ``scope``)
        holding holds with no expiry: the seed's reserve gives it twice the
        reservation TTL after every write (seed 000: each hash outlives its
        newest hold), so an idle budget's holds vanish; one without keeps
        them, and its hash, for ever. Nothing the lab does drops a TTL."""
        if (key, scope, source) in self.hashes_without_ttl:
            return
        self.hashes_without_ttl[key, scope, source] = (now_us, tag)
        request = self.subject.requests.get(tag)
        # What the lab did to the request whose command wrote it, if anything.
        faults = sorted(request.message_faults) if request is not None else []
        self.denial_exposures.add("hold_keys_without_ttl", 1, faults[0] if faults else None,
                                  "reserve" if faults else "")
        self.denial_exposures.parted(now_us, tag, (
            f"a command of request {tag} left {key}'s {scope} holds hash holding holds "
            "with no expiry"))

    def _unfenced(self, source: Any, tag: int) -> bool:
        """Whether request ``tag``'s command on ``source`` comes from a replica
        that booted on a layout a migration had begun emptying: a sound store
        refuses that boot (seed 000:70-75, 409-427), marked mid-migration from
        before its first move and migrated after its last."""
        began = self.emptied.get(source)
        request = self.subject.requests.get(tag)
        booted = self.booted.get(request.replica) if request is not None else None
        return began is not None and booted is not None and booted >= began

    def source_lost(self, source: Any, now_us: int) -> None:
        for scope in self.scopes.values():
            scope.source_lost(source, now_us)

    # -- results ------------------------------------------------------------------

    def sample(self, now_us: int, per_key: bool) -> list[dict[str, Any]]:
        rows = []
        for name, scope in self.scopes.items():
            rows += [{"scope": name, **row} for row in scope.sample(now_us, per_key)]
        return rows

    def summary(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        metrics = self.subject.summary(end_us, last_fault_us)
        metrics["false_denials"] = self.counts.get("false_denials", 0)
        metrics["false_denials_exceeded"] = self.counts.get("false_denials_exceeded", 0)
        metrics["false_denials_store_unavailable"] = self.counts.get(
            "false_denials_store_unavailable", 0)
        for cause in DENIAL_CAUSES:
            metrics[f"false_denials_by_{cause}"] = self.counts.get(f"false_denials_by_{cause}", 0)
        if "namespace" in self.scopes:
            namespace = self.scopes["namespace"].summary(end_us, last_fault_us)
            metrics.update({f"namespace_{name}": value for name, value in namespace.items()
                            if name.startswith(NAMESPACE_METRICS)})
        metrics["hold_keys_without_ttl"] = len(self.hashes_without_ttl)
        metrics.update(self.denial_exposures.summary(
            ["false_denials", "hold_keys_without_ttl"],
            {"false_denials": metrics["false_denials_by_store_logic"],
             "hold_keys_without_ttl": metrics["hold_keys_without_ttl"]}))
        metrics.update(self._began(metrics))
        return metrics

    def _began(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Where the store's damage began, once any invariant has a store-logic
        part: the earliest parting any scope saw, or a false denial's."""
        if not any(name.endswith(EXPOSED_BY_SUFFIX) for name in metrics):
            return {}
        partings = [exposures.began for exposures in
                    (*(scope.exposures for scope in self.scopes.values()),
                     self.denial_exposures) if exposures.began is not None]
        if not partings:
            return {}
        first = min(partings, key=lambda began: began.at_us)
        return dict(zip(BEGAN_KEYS, (first.at_us, first.request, first.call), strict=True))


def budget_oracle(scenario: Scenario, kind: StoreKind, settings: Any) -> BudgetOracle:
    """The oracle of ``scenario`` run on ``kind`` with ``settings``."""
    # A namespace cap judged from the start, even if only a later migration
    # brings a store that enforces it: the overshoot before it is real too.
    every_settings = [settings] + [scenario.settings_after(step)
                                   for step in scenario.operations]
    namespace_cap = next((cap for cap in (getattr(each, "namespace_cap_microdollars", None)
                                          for each in every_settings) if cap is not None), None)
    return BudgetOracle(subject_cap=getattr(settings, "subject_cap_microdollars", None),
                        namespace_cap=namespace_cap, per_replica=kind.per_replica,
                        holds_expire=not kind.holds_count_past_deadline,
                        reservation_ttl_ms=getattr(settings, "reservation_ttl_ms", None),
                        fail_open_allowed=_fail_open(settings))


def _fail_open(settings: Any) -> bool:
    """Whether the scenario configured fail-open admission (a setting only the
    shared stores have; a store without it admits unheld only by design)."""
    policy = getattr(settings, "on_unavailable", None)
    return policy is None or getattr(policy, "value", policy) == "allow"
