"""The ledger family's oracle: holders' truth against the ledger's record.

It hears the holders' side from the lifecycle (``spent``, ``refused``,
``obtained``), the core's facts (crashes, message faults), and the ledger's
record from the service node's observer (``observer``), which reads the
ledger after every transaction. From those it judges:

* the **conservation equation** of every account after every transaction
  (its residual, zero for a sound ledger);
* **billing loss**: units consumed under a lease and never billed, by cause;
* **double billing**: units billed to a lease beyond what was consumed under it;
* **overspend**: units consumed beyond an account's deposits and recorded overage;
* **settlement loss** the ledger reports against the truth (units granted,
  neither consumed nor given back in time): the excess beyond the billing
  loss, and units a holder gave back within the grace that the ledger
  forfeited anyway;
* **fencing violations**: a release of a lease no longer active, or usage
  presenting another capability than the lease's, accepted;
* **units stranded** with no holder until the TTL reclaim, by cause;
* re-grants smaller than the credit the holder gave back for them.
"""

from __future__ import annotations

from typing import Any

from simulator.engine.runtime import EPOCH_MS
from simulator.families.tollgate.books import AccountBook, Counts, LeaseBook, Source, UsageBook
from simulator.families.tollgate.causes import BILLING_LOSS_CAUSES, STRANDED_CAUSES
from simulator.net.links import CALLER_MAY_NOT_KNOW
from simulator.plugin.attribution import STORE_LOGIC
from simulator.world.requests import KeySpace
from stores.tollgate.domain import Conservation, LeaseGrant, LeaseView


class LedgerOracle:
    """The books of one run (see the module docstring)."""

    def __init__(self, keys: list[tuple[str, str]], grace_ms: int) -> None:
        self.grace_ms = grace_ms
        self.accounts = {number: AccountBook(number, key)
                         for number, key in enumerate(keys, start=1)}
        self.leases: dict[int, LeaseBook] = {}
        self.usage: dict[str, UsageBook] = {}
        self.counts = Counts()
        self.faulted: dict[int, set[str]] = {}
        self.aborted_requests: set[int] = set()
        self.holders_lost: set[Source] = set()
        self.refusals: dict[str, int] = {}

    # -- the core's facts ------------------------------------------------------

    def replica_clocks(self, clocks: list[Any]) -> None:
        """Holders judge expiry by their own clocks; the verdict uses the ledger's."""

    def message_fault(self, number: int, what: str, call: str = "") -> None:
        self.faulted.setdefault(number, set()).add(what)

    def aborted(self, number: int, now_us: int) -> None:
        self.aborted_requests.add(number)

    def source_lost(self, source: Any, now_us: int) -> None:
        self.holders_lost.add(source)
        for lease in self.leases.values():
            if lease.holder == source and lease.state == "active":
                lease.holder_lost = True

    # -- the holders' side (the lifecycle) ---------------------------------------

    def spent(self, number: int, source: Source, request_id: str, grant: LeaseGrant,
              units: int) -> None:
        """A spend of ``units`` was charged to ``grant`` by holder ``source``."""
        self.counts.add("spends_admitted")
        self.counts.add("units_consumed", units)
        self.usage[request_id] = UsageBook(grant.lease_id, units)
        self.accounts[grant.account_id].consumed += units
        lease = self.leases.get(grant.lease_id)
        if lease is not None:
            lease.consumed += units

    def refused(self, number: int, refusal: str) -> None:
        self.counts.add("spends_refused")
        self.refusals[refusal] = self.refusals.get(refusal, 0) + 1

    def obtained(self, number: int, source: Source, grant: LeaseGrant, restored: int) -> None:
        """Holder ``source`` received ``grant`` in exchange for ``restored``
        units it gave back (0 for an acquire)."""
        lease = self.leases.get(grant.lease_id)
        if lease is not None and lease.holder is None:
            lease.holder = source
            lease.holder_lost = source in self.holders_lost and lease.state == "active"
        if restored > grant.granted:
            self.counts.add("regrants_below_credit")
            self.counts.add("regrant_shortfall_units", restored - grant.granted)

    # -- the ledger's record (the observer) --------------------------------------

    def granted(self, grant: LeaseGrant, now_us: int, tag: int, via: str) -> None:
        self.counts.add("leases_granted")
        if via == "consolidate":
            self.counts.add("consolidations")
        self.leases[grant.lease_id] = LeaseBook(grant, now_us, tag, via)

    def lease_seen(self, view: LeaseView, now_us: int, credited: int = 0) -> None:
        """The lease as the ledger holds it after a transaction; ``credited``:
        the units that transaction credited back, if it settled the lease."""
        lease = self.leases[view.grant.lease_id]
        state = view.state.value
        if lease.state == "active" and state != "active":
            lease.settled_at_us = now_us
            lease.credited = credited
            self.counts.add(f"leases_{state}")
            if state == "reclaimed" and lease.refused_return:
                self._forfeited(lease, lease.refused_return)
        lease.state, lease.billed, lease.loss = state, view.usage, view.loss

    def usage_arrived(self, request_id: str) -> None:
        book = self.usage.get(request_id)
        if book is None:
            return
        book.arrivals += 1
        if book.arrivals == 1:
            self.leases[book.lease_id].arrived += book.units
        else:
            self.counts.add("usage_events_replayed")

    def returned(self, lease: LeaseBook, unspent: int, now_us: int, accepted: bool,
                 not_active: bool = False) -> None:
        """A release or consolidation giving back ``unspent`` units of ``lease``
        reached the ledger: it counts as given back when it arrived within the
        expiry plus the configured grace, and as forfeited if refused there as
        no longer active -- at once when the ledger had reclaimed the lease, or
        when its sweep reclaims it next."""
        if EPOCH_MS + now_us // 1_000 > lease.grant.expires_at + self.grace_ms:
            return
        if accepted:
            lease.returned_in_time += unspent
        elif not_active and lease.state == "reclaimed":
            self._forfeited(lease, unspent)
        elif not_active and lease.state == "active":
            lease.refused_return = max(lease.refused_return, unspent)

    def _forfeited(self, lease: LeaseBook, unspent: int) -> None:
        lease.returned_in_time += unspent
        self.counts.add("releases_refused_in_grace")
        self.counts.add("units_forfeited_in_grace", unspent)

    def fencing_violation(self) -> None:
        self.counts.add("fencing_violations")

    def statement(self, account: int, conservation: Conservation) -> None:
        book = self.accounts[account]
        book.statement = conservation
        residual = conservation.residual()
        if not conservation.holds():
            self.counts.add("conservation_violations")
        if abs(residual) > abs(book.residual_worst):
            book.residual_worst = residual

    # -- the verdict ---------------------------------------------------------------

    def _billing_loss(self, lease: LeaseBook) -> dict[str, int]:
        unbilled = lease.unbilled
        if not unbilled:
            return {}
        never_arrived = max(0, lease.consumed - lease.arrived)
        cause = ("holder_crashed" if lease.holder_lost or lease.holder is None
                 else "unbilled_at_end")
        split = {cause: min(unbilled, never_arrived)}
        if unbilled > never_arrived:
            split[STORE_LOGIC] = unbilled - never_arrived
        return split

    def _stranded_cause(self, lease: LeaseBook) -> str | None:
        if lease.holder is not None and not lease.holder_lost:
            return None
        if lease.holder_lost or lease.tag in self.aborted_requests:
            return "holder_crashed"
        if self.faulted.get(lease.tag, set()) & CALLER_MAY_NOT_KNOW:
            return f"ambiguous_{lease.via}"
        return STORE_LOGIC

    def summary(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        counts = self.counts
        out: dict[str, Any] = {name: counts.get(name) for name in (
            "spends_admitted", "spends_refused", "units_consumed", "leases_granted",
            "consolidations", "leases_released", "leases_reclaimed", "usage_events_replayed")}
        for refusal in sorted(self.refusals):
            out[f"spends_refused_by_{refusal}"] = self.refusals[refusal]
        statements = [book.statement for book in self.accounts.values()
                      if book.statement is not None]
        out["conservation_violations"] = counts.get("conservation_violations")
        out["conservation_violations_by_store_logic"] = counts.get("conservation_violations")
        out["conservation_residual_units"] = sum(s.residual() for s in statements)
        out["conservation_residual_max_units"] = max(
            (abs(book.residual_worst) for book in self.accounts.values()), default=0)
        billing: dict[str, int] = dict.fromkeys(BILLING_LOSS_CAUSES, 0)
        stranded: dict[str, int] = dict.fromkeys(STRANDED_CAUSES, 0)
        stranded_seconds = 0.0
        double_billed = double_billed_leases = 0
        true_loss = unbilled_settled = 0
        for lease in self.leases.values():
            for cause, units in self._billing_loss(lease).items():
                billing[cause] += units
            if lease.overbilled:
                double_billed += lease.overbilled
                double_billed_leases += 1
            if lease.state != "active":
                true_loss += max(0, lease.grant.granted - lease.consumed - lease.returned_in_time)
                unbilled_settled += lease.unbilled
            cause = self._stranded_cause(lease)
            if cause is not None:
                units = max(0, lease.grant.granted - lease.consumed)
                stranded[cause] += units
                until = lease.settled_at_us if lease.settled_at_us is not None else end_us
                stranded_seconds += units * (until - lease.granted_at_us) / 1e6
        out["billing_loss_units"] = sum(billing.values())
        out.update({f"billing_loss_units_by_{c}": v for c, v in billing.items()})
        out["double_billed_units"] = double_billed
        out["double_billed_units_by_store_logic"] = double_billed
        out["double_billed_leases"] = double_billed_leases
        overspend = sum(max(0, book.consumed - (book.statement.funded() or 0))
                        for book in self.accounts.values() if book.statement is not None)
        out["overspend_units"] = overspend
        out["overspend_units_by_store_logic"] = overspend
        reported = sum(s.settlement_loss for s in statements)
        out["settlement_loss_units"] = reported
        out["settlement_loss_true_units"] = true_loss
        # Beyond the truth, units consumed and never billed are billing loss,
        # filed by cause above; what remains is the ledger's own.
        out["settlement_loss_excess_units"] = reported - true_loss - unbilled_settled
        out["settlement_loss_excess_units_by_store_logic"] = out["settlement_loss_excess_units"]
        forfeited = counts.get("units_forfeited_in_grace")
        out["releases_refused_in_grace"] = counts.get("releases_refused_in_grace")
        out["units_forfeited_in_grace"] = forfeited
        out["units_forfeited_in_grace_by_store_logic"] = forfeited
        fencing = counts.get("fencing_violations")
        out["fencing_violations"] = fencing
        out["fencing_violations_by_store_logic"] = fencing
        out["units_stranded"] = sum(stranded.values())
        out.update({f"units_stranded_by_{c}": v for c, v in stranded.items()})
        out["stranded_unit_seconds"] = round(stranded_seconds, 3)
        shortfall = counts.get("regrant_shortfall_units")
        out["regrants_below_credit"] = counts.get("regrants_below_credit")
        out["regrant_shortfall_units"] = shortfall
        out["regrant_shortfall_units_by_store_logic"] = shortfall
        out["convergence_us"] = None if last_fault_us is None else end_us - last_fault_us
        return out

    def sample(self, now_us: int, per_key: bool) -> list[dict[str, Any]]:
        rows = []
        totals = dict.fromkeys(TERMS, 0)
        consumed = billed = 0
        for book in self.accounts.values():
            terms = _terms(book.statement)
            for name in TERMS:
                totals[name] += terms[name]
            consumed += book.consumed
            if per_key:
                namespace, subject = book.where
                rows.append({"time_us": now_us, "namespace": namespace, "subject": subject,
                             "account": book.account, **terms,
                             "units_consumed": book.consumed})
        billed_by_account: dict[int, int] = {}
        for lease in self.leases.values():
            account = lease.grant.account_id
            billed_by_account[account] = billed_by_account.get(account, 0) + lease.billed
        billed = sum(billed_by_account.values())
        aggregate = {"time_us": now_us, "namespace": "*", "subject": "*", "account": 0,
                     **totals, "units_consumed": consumed, "units_billed": billed,
                     "conservation_violations": self.counts.get("conservation_violations"),
                     "leases_active": sum(1 for lease in self.leases.values()
                                          if lease.state == "active")}
        for row in rows:
            row["units_billed"] = billed_by_account.get(row["account"], 0)
            row["conservation_violations"] = 0
            row["leases_active"] = 0
        return [aggregate, *rows]


TERMS = ("deposited", "overage_recorded", "balance", "active_lease_grants", "settled_usage",
         "settlement_loss", "expired", "residual_units")
"""The equation's terms, as sampled (``residual_units``: left minus right)."""


def _terms(statement: Conservation | None) -> dict[str, int]:
    if statement is None:
        return dict.fromkeys(TERMS, 0)
    return {"deposited": statement.deposited, "overage_recorded": statement.overage_recorded,
            "balance": statement.balance, "active_lease_grants": statement.active_lease_grants,
            "settled_usage": statement.settled_usage, "settlement_loss": statement.settlement_loss,
            "expired": statement.expired, "residual_units": statement.residual()}


def ledger_oracle(scenario: Any, kind: Any, settings: Any) -> LedgerOracle:
    """``Family.oracle``: one account per key of the workload."""
    keys = scenario.workload.keys
    space = KeySpace(keys.namespaces, keys.subjects, keys.zipf_exponent)
    return LedgerOracle(space.keys, settings.reclaim_grace_ms)
