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
* re-grants smaller than the credit the holder gave back for them, and
  consolidations that refused a quote the balance they restored could fund;
* with a budget schedule, **allowances deposited twice**: a rollover that
  deposited an allowance for a period an earlier one had already put in
  force (seed 003 L1142-L1147: one allowance per period, the first pass
  across a boundary wins).

Damage is filed by the family's fault contract (``contract``): what a clause
lets a sound ledger and holder suffer from what the lab did stays under the
clause's cause; the rest is ``store_logic``, kept in ``Exposures`` with the
fault that exposed it (``exposure.LabLog``) and with the call after which
the ledger's record and the truth first parted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from simulator.engine.runtime import EPOCH_MS
from simulator.families.tollgate.books import AccountBook, Counts, LeaseBook, Source, UsageBook
from simulator.families.tollgate.causes import BILLING_LOSS_CAUSES, STRANDED_CAUSES
from simulator.families.tollgate.contract import NEAR_EXHAUSTION, PERIOD_EXPIRED, RACED_BOUNDARY
from simulator.families.tollgate.duties import Cadence, periods_due
from simulator.families.tollgate.exposure import Exposure, LabLog
from simulator.families.tollgate.invariants import INVARIANTS
from simulator.plugin.attribution import STORE_LOGIC
from simulator.plugin.contracts import Exposures
from simulator.world.requests import REQUESTS_PER_REPLICA, KeySpace
from stores.tollgate.domain import Conservation, LeaseGrant, LeaseView
from stores.tollgate.holder import BUSY


@dataclass(frozen=True, slots=True)
class StoreFinding:
    """Damage no clause of the contract allows: ``amount`` of ``metric``,
    first seen at ``at_us`` after a call of ``request``, on what requests
    ``tags`` did (whose faults may have exposed it; ``otherwise``: what did
    when no fault of the lab's did), the call in ``words``."""

    metric: str
    amount: int
    tags: frozenset[int]
    otherwise: Exposure
    at_us: int
    request: int
    words: str


PERIODS_LISTED = 10_000
"""Budget periods a run's duties are judged in one by one; past them, in
windows the lab left alone, the periods missed are counted at once
(``_periods_missed_from``), with the same total."""
HOLD_BACK_SLACK_MS = 2_000
"""Beyond two flush periods, what one background loop's calls (a flush, the
releases, a sweep, a rollover) may take before the next flush starts."""


class LedgerOracle:
    """The books of one run (see the module docstring)."""

    def __init__(self, keys: list[tuple[str, str]], grace_ms: int, faults: Any = None,
                 flush_every_ms: int = 500, spend_margin_ms: int = 2_000,
                 allocation_wait_ms: int = 0, cadence: Cadence | None = None,
                 budget_period_ms: int | None = None, replicas: int = 1) -> None:
        self.grace_ms = grace_ms
        self.cadence = cadence
        """How often the holders' loop runs each duty (``duties``; ``None``: unchecked)."""
        self.budget_period_ms = budget_period_ms
        """The accounts' budget period, when they have a schedule."""
        self.replicas = replicas
        self.allocation_wait_us = allocation_wait_ms * 1_000
        self.last_tokens: dict[int, int] = {}
        """Each account's latest fencing token granted."""
        self.spending: dict[int, tuple[Source, int, int]] = {}
        """Each spend a holder is working on: its holder, account and start."""
        self.allocators: set[int] = set()
        """The requests whose acquire or consolidate reached the ledger."""
        self.faulted: set[int] = set()
        """The requests a message fault touched."""
        self.busy: list[tuple[int, list[int], int, str]] = []
        """``busy`` refusals after the wait, to judge at the end: the request,
        the other spends of its holder for the account then under way, when,
        and the words."""
        self.overdue_us = (2 * flush_every_ms + HOLD_BACK_SLACK_MS) * 1_000
        self.spend_margin_ms = spend_margin_ms
        self.clocks_true = True
        """No replica's clock is skewed or drifts (``replica_clocks``)."""
        """How long after a spend a live holder, left alone by the lab, has
        surely sent its usage: its next flush, one loop's calls later."""
        self.accounts = {number: AccountBook(number, key)
                         for number, key in enumerate(keys, start=1)}
        self.leases: dict[int, LeaseBook] = {}
        self.usage: dict[str, UsageBook] = {}
        self.counts = Counts()
        self.aborted_requests: set[int] = set()
        self.holders_lost: set[Source] = set()
        self.refusals: dict[str, int] = {}
        self.lab = LabLog(faults)
        self.now_us = 0
        """The virtual time of the last transaction the observer reported."""
        self.call: tuple[str, int, tuple] = ("", -1, ())
        """That transaction: its verb, request (tag) and arguments."""
        self.call_replica: int | None = None
        """The replica that sent it, when known (``_replica_of``)."""
        self.store_found: list[StoreFinding] = []
        """Store-logic damage found as the run went (``StoreFinding``)."""
        self._charged: dict[Source, int] = {}

    def transaction(self, now_us: int, tag: int, verb: str, args: tuple) -> None:
        """The observer is about to file what a transaction did (``call``)."""
        self.now_us = now_us
        self.call = (verb, tag, args)
        if verb in ("acquire", "consolidate"):
            self.allocators.add(tag)
        self.call_replica = self._replica_of(tag, verb, args)

    def _replica_of(self, tag: int, verb: str, args: tuple) -> int | None:
        """The replica that sent a transaction: its request's; for a call of
        a holder's background loop (no request), the holder of the lease it
        releases or of the usage it bills; ``None`` for a sweep."""
        if tag >= 0:
            return tag // REQUESTS_PER_REPLICA
        holder: Source | None = None
        if verb in ("release", "consolidate") and args and args[0] in self.leases:
            holder = self.leases[args[0]].holder
        elif verb == "ingest" and args and args[0]:
            book = self.usage.get(args[0][0].request_id)
            holder = book.source if book is not None else None
        return holder[0] if holder is not None else None

    # -- the core's facts ------------------------------------------------------

    def replica_clocks(self, clocks: list[Any]) -> None:
        """Holders judge expiry by their own clocks; the verdict uses the
        ledger's, and asks a live holder to give a lease back in time only
        when no holder's clock is off (``kept_past_expiry``)."""
        self.clocks_true = all(clock.offset_us == 0 and clock.drift_ppm == 0
                               for clock in clocks)

    def message_fault(self, number: int, what: str, call: str = "") -> None:
        self.faulted.add(number)
        self.lab.message(self.now_us, number, what, call)

    def aborted(self, number: int, now_us: int) -> None:
        self.aborted_requests.add(number)

    def settings_in_force(self, replica: int, changes: dict[str, Any], now_us: int) -> None:
        """A holder reconfigured (``lease_units``, ``lease_ttl``: what it asks
        for): nothing to follow, as every lease is judged by the grant and
        the expiry the ledger recorded for it, never by what was asked."""

    def source_lost(self, source: Any, now_us: int) -> None:
        self.holders_lost.add(source)
        self.lab.crash(now_us, source[0])
        for lease in self.leases.values():
            if lease.holder == source and lease.state == "active":
                lease.holder_lost = True

    # -- the holders' side (the lifecycle) ---------------------------------------

    def spent(self, number: int, source: Source, request_id: str, grant: LeaseGrant,
              units: int, now_us: int = 0, fresh: bool = False) -> None:
        """A spend of ``units`` was charged to ``grant`` by holder ``source``
        now (``fresh``: a grant the spend itself just obtained). A lease the
        holder already held is spent only before its expiry less the spend
        margin (seed 003 L264-L270), by the holder's clock: with every clock
        true, a charge at or past it is the holder's (``spends_past_margin``)."""
        self.spending.pop(number, None)
        if (not fresh and self.clocks_true
                and EPOCH_MS + now_us // 1_000 >= grant.expires_at - self.spend_margin_ms):
            self.counts.add("spends_past_margin")
            self._found("spends_past_margin", 1, {number}, (None, ""), number,
                        f"spend on replica {source[0]} for request {number}: charged lease "
                        f"{grant.lease_id} {grant.expires_at - EPOCH_MS - now_us // 1_000:,} ms "
                        f"before its expiry, inside the {self.spend_margin_ms:,} ms spend margin",
                        now_us)
        self.counts.add("spends_admitted")
        self.counts.add("units_consumed", units)
        order = self._charged[source] = self._charged.get(source, 0) + 1
        self.usage[request_id] = UsageBook(grant.lease_id, units, source=source, order=order,
                                           consumed_at_us=now_us)
        self.accounts[grant.account_id].consumed += units
        lease = self.leases.get(grant.lease_id)
        if lease is not None:
            lease.consumed += units
            lease.touched_by.add(number)

    def spend_began(self, number: int, source: Source, account: int, now_us: int) -> None:
        """Holder ``source`` began spend ``number`` on ``account`` (until it
        is charged or refused)."""
        self.spending[number] = (source, account, now_us)

    def refused(self, number: int, refusal: str, now_us: int = 0) -> None:
        """The holder refused spend ``number`` (``refusal``: why). A ``busy``
        refusal is the holder's own word that another spend of its for the
        account was allocating all along its ``allocation_wait``: one that
        came sooner is a false refusal, the holder's; so is one where no other
        spend of that holder for the account then under way allocated (its
        acquire or consolidate reached the ledger) or lost a message on the
        way (``busy_judged``, at the end)."""
        self.counts.add("spends_refused")
        self.refusals[refusal] = self.refusals.get(refusal, 0) + 1
        began = self.spending.pop(number, None)
        if refusal != BUSY or began is None:
            return
        source, account, started_us = began
        waited_us = now_us - started_us
        words = f"spend on replica {source[0]} for request {number} (account {account}): "
        if waited_us < self.allocation_wait_us:
            self._false_refusal(number, words + (
                f"refused busy after {waited_us / 1_000:,.0f} ms, before its "
                f"{self.allocation_wait_us / 1_000:,.0f} ms allocation wait"), now_us)
            return
        rivals = [other for other, (holder, of, _) in self.spending.items()
                  if other != number and holder == source and of == account]
        self.busy.append((number, rivals, now_us, words + (
            "refused busy while no other spend of its holder for the account allocated")))

    def busy_judged(self) -> None:
        """Each ``busy`` refusal after the wait with no rival that allocated
        (or lost a message on its way to) is a false refusal."""
        for number, rivals, at_us, words in self.busy:
            if not any(other in self.allocators or other in self.faulted for other in rivals):
                self._false_refusal(number, words, at_us)
        self.busy.clear()

    def allocation_refused(self, verb: str, args: tuple, refusal: Exception,
                           view: Any) -> None:
        """The ledger refused an ``acquire`` or a ``consolidate`` with
        ``refusal`` while its own record (``view``: the account's, read now;
        ``None``: it has none) says it could grant: an account the lab
        funded is no unknown one, an active one no inactive one, a positive
        TTL no invalid one, and a positive balance funds a grant (the
        policy's shrink sizing grants at least one unit of any)."""
        if verb == "acquire":
            account, ttl_ms, restored = args[0], args[2], 0
        else:
            lease = self.leases.get(args[0])
            if lease is None:
                return
            account, ttl_ms, restored = lease.grant.account_id, args[5], args[2]
            periods = self.accounts[account].periods if account in self.accounts else ()
            if periods and lease.granted_at_us < max(periods) * 1_000:
                # Granted before the period in force began: what it gives back
                # may be a closed period's allowance, which expires rather than
                # returns (the ledger's rule), so only the balance is counted.
                restored = 0
        if account not in self.accounts or view is None:
            return
        name = type(refusal).__name__
        if name == "UnknownAccount":
            why = "an account it holds"
        elif name == "AccountInactive" and view.status.name == "ACTIVE":
            why = "an active account"
        elif name == "InvalidTtl" and isinstance(ttl_ms, int) and ttl_ms > 0:
            why = f"a valid TTL of {ttl_ms:,} ms"
        elif (name in ("BalanceExhausted", "BalanceInsufficient")
              and view.conservation.balance + restored > 0):
            why = f"{view.conservation.balance + restored:,} units it could fund a grant from"
        else:
            return
        tag = self.call[1]
        self._false_refusal(tag, self._words(tag, f"refused {name} on account {account}, "
                                                  f"with {why}"))

    def _false_refusal(self, request: int, words: str, at_us: int | None = None) -> None:
        self.counts.add("false_refusals")
        self._found("false_refusals", 1, {request}, (None, ""), request, words, at_us)

    def obtained(self, number: int, source: Source, grant: LeaseGrant, restored: int) -> None:
        """Holder ``source`` received ``grant`` in exchange for ``restored``
        units it gave back (0 for an acquire)."""
        lease = self.leases.get(grant.lease_id)
        if lease is not None and lease.holder is None:
            lease.holder = source
            lease.holder_lost = source in self.holders_lost and lease.state == "active"
        if restored > grant.granted:
            shortfall = restored - grant.granted
            self.counts.add("regrants_below_credit")
            self.counts.add("regrant_shortfall_units", shortfall)
            via = lease.via if lease is not None else "acquire"
            self._found("regrant_shortfall_units", shortfall, {number},
                        (NEAR_EXHAUSTION, via), number,
                        f"{via} of lease {grant.lease_id} on replica {source[0]} for "
                        f"request {number}: gave back {restored:,} units, re-granted "
                        f"{grant.granted:,}")

    def exchange_sized(self, grant: LeaseGrant, needed: int, balance: int) -> None:
        """A consolidation for a refused quote of ``needed`` units granted
        ``grant`` and left ``balance`` unleased, so it sized the grant against
        ``balance + granted``. When that could fund the quote and the grant
        falls short of it, demand the holder had already proven was refused:
        the ledger's own (no clause allows it)."""
        restored = balance + grant.granted
        if not grant.granted < needed <= restored:
            return
        short = needed - grant.granted
        self.counts.add("regrants_below_demand")
        self.counts.add("demand_shortfall_units", short)
        tag = self.call[1]
        self._found("demand_shortfall_units", short, {tag}, (NEAR_EXHAUSTION, "consolidate"),
                    tag, self._words(tag, f"granted lease {grant.lease_id} {grant.granted:,} "
                                          f"units for a refused quote of {needed:,} that its "
                                          f"restored balance of {restored:,} could fund"))

    # -- the ledger's record (the observer) --------------------------------------

    def granted(self, grant: LeaseGrant, now_us: int, tag: int, via: str,
                stale_exchange: bool = False) -> None:
        """The ledger granted ``grant`` by ``via``; ``stale_exchange``: by a
        consolidation of a lease no longer active (or another's token), which a
        sound ledger refuses."""
        self.counts.add("leases_granted")
        if via == "consolidate":
            self.counts.add("consolidations")
        self.leases[grant.lease_id] = LeaseBook(grant, now_us, tag, via,
                                                stale_exchange=stale_exchange)
        # The seed's tokens come from a strictly increasing per-account sequence.
        last = self.last_tokens.get(grant.account_id)
        self.last_tokens[grant.account_id] = grant.fencing_token
        if last is not None and grant.fencing_token <= last:
            self.counts.add("fencing_violations")
            self._found("fencing_violations", 1, {tag}, (None, ""), tag, self._words(
                tag, f"granted lease {grant.lease_id} of account {grant.account_id} token "
                     f"{grant.fencing_token}, not above the account's last token, {last}"))

    def lease_seen(self, view: LeaseView, now_us: int, credited: int = 0) -> None:
        """The lease as the ledger holds it after a transaction; ``credited``:
        the units that transaction credited back, if it settled the lease."""
        lease = self.leases[view.grant.lease_id]
        state = view.state.value
        if view.usage > max(lease.consumed, lease.billed):
            # Billed beyond what was consumed under it, by this transaction.
            extra = view.usage - max(lease.consumed, lease.billed)
            self._found_on(lease, "double_billed_units", extra,
                           f"billed {view.usage:,} units to lease {lease.grant.lease_id}, "
                           f"{lease.consumed:,} consumed under it")
        if lease.state == "active" and state != "active":
            lease.settled_at_us = now_us
            lease.settled_by = self._words(self.call[1], "")
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
            book.arrived_at_us = self.now_us
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
        self._found_on(lease, "units_forfeited_in_grace", unspent,
                       f"forfeited {unspent:,} units of lease {lease.grant.lease_id} given "
                       f"back within its grace")

    def fencing_violation(self, lease: LeaseBook | None = None) -> None:
        self.counts.add("fencing_violations")
        if lease is not None:
            self._found_on(lease, "fencing_violations", 1,
                           f"accepted a stale capability for lease {lease.grant.lease_id} "
                           f"(token {lease.grant.fencing_token}, {lease.state})")
        else:
            self._found("fencing_violations", 1, {self.call[1]}, (None, ""), self.call[1],
                        self._words(self.call[1], "accepted a stale capability"))

    def rolled(self, account: int, deposited: int, expired: int, period_start: int) -> None:
        """A rollover moved ``account`` into the period starting at
        ``period_start``: it deposited ``deposited`` units of allowance and
        expired ``expired`` unspent ones. One allowance per period: a second
        deposit into a period already in force is the ledger's (no clause
        allows it, whatever pass raced it)."""
        book = self.accounts[account]
        self.counts.add("periods_rolled")
        self.counts.add("allowance_deposited_units", deposited)
        self.counts.add("allowance_expired_units", expired)
        book.expired_units += expired
        if period_start in book.periods:
            self.counts.add("rollovers_repeated")
            self.counts.add("allowance_deposited_twice_units", deposited)
            tag = self.call[1]
            self._found("allowance_deposited_twice_units", deposited, {tag},
                        (RACED_BOUNDARY, self.call[0]), tag, self._words(
                            tag, f"deposited account {account}'s allowance of {deposited:,} "
                                 f"units for the period starting at {period_start} ms again, "
                                 f"expiring {expired:,} units of it"))
        book.periods.add(period_start)

    def statement(self, account: int, conservation: Conservation) -> None:
        book = self.accounts[account]
        book.statement = conservation
        residual = conservation.residual()
        if not conservation.holds():
            self.counts.add("conservation_violations")
            tag = self.call[1]
            # With no fault of the lab's: what made a statement's terms move
            # apart is a period that expired allowance, if one did.
            otherwise = ((PERIOD_EXPIRED, "roll_due_periods") if book.expired_units
                         else (None, ""))
            self._found("conservation_violations", 1, {tag}, otherwise, tag, self._words(
                tag, f"account {account} left with a residual of {residual:,} units "
                     f"(funded {conservation.funded()})"))
        if abs(residual) > abs(book.residual_worst):
            book.residual_worst = residual

    # -- store-logic findings -------------------------------------------------------

    def _found(self, metric: str, amount: int, tags: Iterable[int], otherwise: Exposure,
               request: int, words: str,
               at_us: int | None = None) -> None:
        """``amount`` of ``metric`` no clause of the contract allows, first seen
        now (or at ``at_us``) on what requests ``tags`` did."""
        when = self.now_us if at_us is None else at_us
        self.store_found.append(StoreFinding(metric, amount, frozenset(tags), otherwise,
                                             when, request, words))

    def _found_on(self, lease: LeaseBook, metric: str, amount: int, what: str) -> None:
        """Store-logic damage to ``lease`` by the transaction being filed."""
        tag = self.call[1]
        self._found(metric, amount, self._lease_tags(lease) | {tag}, (None, ""),
                    tag if tag >= 0 else lease.tag, self._words(tag, what))

    def _lease_tags(self, lease: LeaseBook) -> set[int]:
        """The requests whose transactions granted, exchanged, released or
        billed ``lease``, and those whose spends were charged to it."""
        return {lease.tag, *lease.touched_by}

    def _words(self, tag: int, what: str) -> str:
        """The transaction being filed, in words: the call, the replica that
        sent it (``call_replica``), its request, and ``what`` it did."""
        verb = self.call[0] or "a transaction"
        who = f"replica {self.call_replica}" if self.call_replica is not None else "a holder"
        request = f" for request {tag}" if tag >= 0 else " (its background loop)"
        return f"{verb} on {who}{request}: {what}"

    def billed(self, lease: LeaseBook, asked: int) -> None:
        """An ingest carrying ``asked`` units for ``lease`` committed: usage it
        received and did not bill is the ledger's (no clause allows it)."""
        gap = lease.arrived - lease.billed
        if gap > 0 and lease.unbilled_arrived_at_us is None:
            lease.unbilled_arrived_at_us = self.now_us
            lease.unbilled_arrived_words = self._words(
                self.call[1], f"asked to bill {asked:,} units to lease {lease.grant.lease_id}, "
                              f"{gap:,} of those it received left unbilled "
                              f"(billed {lease.billed:,})")

    # -- the verdict ---------------------------------------------------------------

    def _dropped(self) -> dict[int, tuple[int, int]]:
        """Usage a live holder gave up on: events that never reached the ledger
        while a later event of the same holder did (a sound holder re-sends a
        batch unchanged until the ledger answers, in order). By lease: the
        units, and when the first later event arrived."""
        latest: dict[Source, list[tuple[int, int]]] = {}
        for book in self.usage.values():
            if book.arrived_at_us is not None and book.source is not None:
                latest.setdefault(book.source, []).append((book.order, book.arrived_at_us))
        dropped: dict[int, tuple[int, int]] = {}
        for book in self.usage.values():
            if book.arrivals or book.source not in latest:
                continue
            later = [at for order, at in latest[book.source] if order > book.order]
            if later:
                units, first = dropped.get(book.lease_id, (0, min(later)))
                dropped[book.lease_id] = (units + book.units, min(first, min(later)))
        return dropped

    def _held_back(self, end_us: int) -> dict[int, tuple[int, int]]:
        """Usage a live holder never sent although the lab left it alone long
        enough (``overdue_us``) after the spend: a sound holder flushes every
        ``flush_every`` until its queue is empty (seed 003 L1339-L1360).
        Events ``_dropped`` counts (a later one of the holder arrived) are
        not counted again. By lease: the units, and when the first was due."""
        later: dict[Source, int] = {}
        for book in self.usage.values():
            if book.arrived_at_us is not None and book.source is not None:
                later[book.source] = max(later.get(book.source, 0), book.order)
        held: dict[int, tuple[int, int]] = {}
        for book in self.usage.values():
            due = book.consumed_at_us + self.overdue_us
            if (book.arrivals or book.source in self.holders_lost or due > end_us
                    or later.get(book.source, 0) > book.order
                    or not self.lab.quiet_since(book.consumed_at_us)):
                continue
            units, first = held.get(book.lease_id, (0, due))
            held[book.lease_id] = (units + book.units, min(first, due))
        return held

    def _billing_loss(self, lease: LeaseBook, dropped: int) -> dict[str, int]:
        """Units consumed under ``lease`` and never billed, by the contract:
        usage the ledger received (its ingest committed) and did not bill, and
        usage its live holder gave up on, are the store's; the rest never
        reached the ledger, because its holder died (or none received the
        lease) or the run ended first."""
        unbilled = lease.unbilled
        if not unbilled:
            return {}
        never_arrived = max(0, lease.consumed - lease.arrived)
        store = min(unbilled, max(0, unbilled - never_arrived) + dropped)
        cause = ("holder_crashed" if lease.holder_lost or lease.holder is None
                 else "unbilled_at_end")
        split = {cause: unbilled - store}
        if store:
            split[STORE_LOGIC] = store
        return split

    def _stranded_cause(self, lease: LeaseBook) -> str | None:
        """Why ``lease`` had no holder, by the contract: its holder died; or the
        call that granted it ran without its caller reading the answer (an
        ``ambiguous_*`` clause). A lost request, a refused or unopened
        connection never ran, so it strands nothing: the store's."""
        if lease.holder is not None and not lease.holder_lost:
            return STORE_LOGIC if self._kept_past_expiry(lease) else None
        if lease.holder_lost or lease.tag in self.aborted_requests:
            return "holder_crashed"
        if lease.stale_exchange:
            return STORE_LOGIC  # a re-sent consolidation is refused, and grants nothing
        if self.lab.ran_unanswered(lease.tag, lease.via):
            return f"ambiguous_{lease.via}"
        return STORE_LOGIC

    def _kept_past_expiry(self, lease: LeaseBook) -> bool:
        """A live holder let the sweep reclaim ``lease`` although the lab left
        it alone from ``spend_margin`` before its expiry on, with every clock
        true: a sound holder stops spending at ``expires_at`` less its safety
        margin (seed 003 L264-L270) and gives a lease back by ``release``
        (L488-L491) at its next flush, well inside the margin and the grace."""
        if lease.state != "reclaimed" or not self.clocks_true:
            return False
        margin_from_ms = lease.grant.expires_at - self.spend_margin_ms - EPOCH_MS
        return self.lab.quiet_since(max(0, margin_from_ms * 1_000))

    def _duties_undone(self, end_us: int) -> dict[str, list[StoreFinding]]:
        """The holders' background duties left undone long after they fell due
        while the lab left the fleet alone (``duties``): budget periods no
        rollover deposited, leases no sweep reclaimed in time."""
        undone: dict[str, list[StoreFinding]] = {"periods_missed": [], "reclaims_overdue": []}
        cadence = self.cadence
        if cadence is None or not self.clocks_true:
            return undone  # holders time their duties by their own clocks
        end_ms = EPOCH_MS + end_us // 1_000

        def quiet(from_ms: int, until_ms: int) -> bool:
            return self.lab.quiet_between((from_ms - EPOCH_MS) * 1_000,
                                          (until_ms - EPOCH_MS) * 1_000, self.replicas)

        # A rated fault may act at any time: no window is ever quiet.
        if self.budget_period_ms is not None and not self.lab.rated:
            late = cadence.late_by(cadence.rollover_every_ms)
            disturbed_ms = EPOCH_MS + self.lab.disturbed_until_us() // 1_000 + 1
            for listed, (start, due) in enumerate(periods_due(self.budget_period_ms, end_ms)):
                if due + late > end_ms:
                    break  # due later still: none of the rest is late by the end
                window_ms = due - cadence.rollover_every_ms
                if listed >= PERIODS_LISTED and window_ms > disturbed_ms:
                    undone["periods_missed"] += self._periods_missed_from(start, late, end_ms)
                    break
                for book in self.accounts.values():
                    if start not in book.periods and quiet(window_ms, due + late):
                        undone["periods_missed"].append(self._period_missed(
                            book.account, start, due, late, 1))
        late = cadence.late_by(cadence.reclaim_every_ms)
        for lease in self.leases.values():
            due = lease.grant.expires_at + self.grace_ms
            deadline_us = (due + late - EPOCH_MS) * 1_000
            settled_us = lease.settled_at_us if lease.state != "active" else None
            if (deadline_us <= end_us and (settled_us is None or settled_us > deadline_us)
                    and quiet(due - cadence.reclaim_every_ms, due + late)):
                undone["reclaims_overdue"].append(StoreFinding(
                    "reclaims_overdue", 1, frozenset({lease.tag}), (None, ""),
                    (due - EPOCH_MS) * 1_000, lease.tag,
                    f"no sweep reclaimed lease {lease.grant.lease_id} within {late:,} ms of "
                    f"its expiry and grace"))
        return undone

    def _period_missed(self, account: int, start: int, due: int, late: int,
                       periods: int) -> StoreFinding:
        """``periods`` budget periods of ``account`` from the one at ``start``
        that no rollover deposited within ``late`` ms of falling due."""
        which = (f"the period starting at {start} ms" if periods == 1 else
                 f"{periods:,} periods from the one starting at {start} ms")
        return StoreFinding("periods_missed", periods, frozenset(), (None, ""),
                            (due - EPOCH_MS) * 1_000, -1,
                            f"no rollover deposited account {account}'s allowance for "
                            f"{which} within {late:,} ms")

    def _periods_missed_from(self, first: int, late: int, end_ms: int) -> list[StoreFinding]:
        """The periods missed from the one at ``first`` to the last due by the
        end, every one of them in a window the lab left alone: counted, one
        finding per account (a long run with a short period, as ``check``
        meets: hundreds of millions of periods, never listed one by one)."""
        assert self.budget_period_ms is not None
        due_by_end = (end_ms - late - first) // self.budget_period_ms + 1
        last = first + (due_by_end - 1) * self.budget_period_ms
        missed = []
        for book in self.accounts.values():
            deposited = sum(1 for start in book.periods if first <= start <= last)
            if due_by_end > deposited:
                missed.append(self._period_missed(book.account, first, first, late,
                                                  due_by_end - deposited))
        return missed

    def _exposures(self, extra: list[StoreFinding]) -> Exposures:
        """Every store-logic finding by the fault that exposed it, and where the
        ledger's record and the truth first parted."""
        exposures = Exposures()
        for found in [*self.store_found, *extra]:
            fault, call = self.lab.exposed_by(found.tags, found.at_us, found.otherwise)
            exposures.add(found.metric, found.amount, fault, call)
            exposures.parted(found.at_us, found.request, found.words)
        return exposures

    def summary(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        self.busy_judged()
        counts = self.counts
        found: list[StoreFinding] = []
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
        violations = [f for f in self.store_found if f.metric == "conservation_violations"]
        if out["conservation_residual_max_units"] and violations:
            first = violations[0]
            found.append(StoreFinding("conservation_residual_max_units",
                                      out["conservation_residual_max_units"], first.tags,
                                      first.otherwise, first.at_us, first.request, first.words))
        billing: dict[str, int] = dict.fromkeys(BILLING_LOSS_CAUSES, 0)
        stranded: dict[str, int] = dict.fromkeys(STRANDED_CAUSES, 0)
        stranded_seconds = 0.0
        double_billed = double_billed_leases = 0
        true_loss = unbilled_settled = 0
        dropped, held_back = self._dropped(), self._held_back(end_us)
        for lease in self.leases.values():
            given_up, overtaken_at = dropped.get(lease.grant.lease_id, (0, None))
            kept, due_at = held_back.get(lease.grant.lease_id, (0, None))
            for cause, units in self._billing_loss(lease, given_up + kept).items():
                billing[cause] += units
                if cause == STORE_LOGIC:
                    found.append(self._unbilled_finding(lease, units, given_up, overtaken_at,
                                                        kept, due_at))
            if lease.overbilled:
                double_billed += lease.overbilled
                double_billed_leases += 1
            if lease.state != "active":
                lease_true = max(0, lease.grant.granted - lease.consumed - lease.returned_in_time)
                true_loss += lease_true
                unbilled_settled += lease.unbilled
                excess = lease.loss - lease_true - lease.unbilled
                if excess:
                    found.append(self._excess_finding(lease, excess))
            cause = self._stranded_cause(lease)
            if cause is not None:
                units = max(0, lease.grant.granted - lease.consumed)
                stranded[cause] += units
                until = lease.settled_at_us if lease.settled_at_us is not None else end_us
                stranded_seconds += units * (until - lease.granted_at_us) / 1e6
                if cause == STORE_LOGIC and units:
                    found.append(self._stranded_finding(lease, units))
        out["billing_loss_units"] = sum(billing.values())
        out.update({f"billing_loss_units_by_{c}": v for c, v in billing.items()})
        out["double_billed_units"] = double_billed
        out["double_billed_units_by_store_logic"] = double_billed
        out["double_billed_leases"] = double_billed_leases
        overspend = 0
        for book in self.accounts.values():
            if book.statement is None:
                continue
            over = max(0, book.consumed - (book.statement.funded() or 0))
            overspend += over
            if over:
                found.append(self._overspend_finding(book.account, over))
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
        short_of_demand = counts.get("demand_shortfall_units")
        out["regrants_below_demand"] = counts.get("regrants_below_demand")
        out["demand_shortfall_units"] = short_of_demand
        out["demand_shortfall_units_by_store_logic"] = short_of_demand
        out["spends_past_margin"] = counts.get("spends_past_margin")
        out["spends_past_margin_by_store_logic"] = counts.get("spends_past_margin")
        out["false_refusals"] = counts.get("false_refusals")
        out["false_refusals_by_store_logic"] = counts.get("false_refusals")
        out["periods_rolled"] = counts.get("periods_rolled")
        out["allowance_deposited_units"] = counts.get("allowance_deposited_units")
        out["allowance_expired_units"] = counts.get("allowance_expired_units")
        twice = counts.get("allowance_deposited_twice_units")
        out["rollovers_repeated"] = counts.get("rollovers_repeated")
        out["allowance_deposited_twice_units"] = twice
        out["allowance_deposited_twice_units_by_store_logic"] = twice
        for metric, findings in self._duties_undone(end_us).items():
            out[metric] = out[f"{metric}_by_store_logic"] = sum(
                finding.amount for finding in findings)
            found += findings
        out["convergence_us"] = None if last_fault_us is None else end_us - last_fault_us
        store_logic = {invariant.metric: invariant.causes(out).get(STORE_LOGIC, 0)
                       for invariant in INVARIANTS}
        out.update(self._exposures(found).summary(store_logic, store_logic))
        return out

    def _unbilled_finding(self, lease: LeaseBook, units: int, given_up: int,
                          overtaken_at: int | None, kept: int = 0,
                          due_at: int | None = None) -> StoreFinding:
        """Usage of ``lease`` the ledger received and did not bill, or that its
        live holder gave up on or held back."""
        tags = self._lease_tags(lease)
        if lease.unbilled_arrived_at_us is not None and (
                overtaken_at is None or lease.unbilled_arrived_at_us <= overtaken_at):
            return StoreFinding("billing_loss_units", units, frozenset(tags), (None, ""),
                                lease.unbilled_arrived_at_us, lease.tag,
                                lease.unbilled_arrived_words)
        holder = lease.holder[0] if lease.holder is not None else "?"
        if kept and due_at is not None and (overtaken_at is None or due_at < overtaken_at):
            return StoreFinding(
                "billing_loss_units", units, frozenset(tags), (None, ""), due_at, lease.tag,
                f"holder on replica {holder}: {kept:,} units charged to lease "
                f"{lease.grant.lease_id} never sent, {self.overdue_us / 1e6:g} s after the "
                f"spend with nothing done to it")
        return StoreFinding(
            "billing_loss_units", units, frozenset(tags), (None, ""),
            overtaken_at if overtaken_at is not None else self.now_us, lease.tag,
            f"ingest on replica {holder}: later usage of the same holder arrived, "
            f"{given_up:,} units charged to lease {lease.grant.lease_id} before it never sent")

    def _excess_finding(self, lease: LeaseBook, excess: int) -> StoreFinding:
        # The record and the truth part at the settlement, or later, when
        # usage for the lease arrives: whichever the ledger did last.
        arrivals = [book.arrived_at_us for book in self.usage.values()
                    if book.lease_id == lease.grant.lease_id and book.arrived_at_us is not None]
        settled = lease.settled_at_us if lease.settled_at_us is not None else self.now_us
        at_us = max(settled, max(arrivals, default=settled))  # no starred list: Cython
        settled_by = lease.settled_by or "a transaction: "
        words = (f"{settled_by}settled lease {lease.grant.lease_id} ({lease.state}) with a "
                 f"loss of {lease.loss:,} units; the truth, once its usage was in, "
                 f"{lease.loss - excess:,}")
        return StoreFinding("settlement_loss_excess_units", excess,
                            frozenset(self._lease_tags(lease)), (None, ""), at_us, lease.tag,
                            words)

    def _stranded_finding(self, lease: LeaseBook, units: int) -> StoreFinding:
        if lease.holder is not None and not lease.holder_lost:
            return StoreFinding(
                "units_stranded", units, frozenset({lease.tag}), (None, ""),
                lease.settled_at_us if lease.settled_at_us is not None else lease.granted_at_us,
                lease.tag,
                f"holder on replica {lease.holder[0]}: kept lease {lease.grant.lease_id} "
                f"({units:,} units unspent) until the sweep reclaimed it, never given back")
        return StoreFinding(
            "units_stranded", units, frozenset({lease.tag}), (None, ""), lease.granted_at_us,
            lease.tag,
            f"{lease.via} for request {lease.tag}: granted lease {lease.grant.lease_id} "
            f"({lease.grant.granted:,} units), which no holder received")

    def _overspend_finding(self, account: int, over: int) -> StoreFinding:
        tags = {tag for lease in self.leases.values() if lease.grant.account_id == account
                for tag in self._lease_tags(lease)}
        return StoreFinding("overspend_units", over, frozenset(tags), (None, ""), self.now_us,
                            -1, f"account {account}: {over:,} units spent beyond its funding")

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
    space = KeySpace.of(keys)
    return LedgerOracle(space.keys, settings.reclaim_grace_ms, scenario.faults,
                        settings.flush_every_ms, settings.spend_margin_ms,
                        settings.allocation_wait_ms,
                        Cadence(settings.flush_every_ms, settings.reclaim_every_ms,
                                settings.rollover_every_ms, HOLD_BACK_SLACK_MS),
                        None if settings.budget_allowance is None else settings.budget_period_ms,
                        scenario.fleet.replicas)
