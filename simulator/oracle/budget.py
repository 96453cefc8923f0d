"""The budget oracle: the truth of every request against the store's record.

The simulator knows the truth (which requests ran, what each really spent)
and sees the store's record exactly: after every command the server reports
the post-state of the keys it touched (``observe``), and reservation ids are
tied to the request that minted them. Every metric follows from those two
streams of facts; none is assumed. ``docs/metrics.md`` defines each one.

Rules kept here:

* **Truth view** ``V`` of a key: for every admitted request, its estimate
  while it runs and its actual spend once its work completed (aborted work
  counts nothing). An admission is *wrongful* when ``V + estimate > cap``: an
  ideal limiter would have refused it. A denial is *false* when an ideal
  limiter would have admitted: ``V + estimate <= cap``, counting a request
  whose settlement is still on its way at its estimate (the ideal limiter
  learns the actual spend from the settlement, like the real one).
* **Shortfall** (truth − store) is kept per request, in the bucket of its
  cause: a hold that expired while its request ran, a settlement that never
  landed, a hold lost to a restart or eviction, a fail-open admission, a
  settle in flight charging more than was held (estimate underrun). Each
  wrongful admission's excess is split over the positive buckets at that
  instant.
* **Cap overshoot** of a key, ``max(0, true spend − cap)``, is split over the
  causes in proportion to the wrongful excess they produced plus the estimate
  underrun of the requests that completed.
* Removals are applied before creations within one observation: a reserve
  reclaims expired holds before it decides.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from simulator.oracle.attribution import CAUSES, apportion
from simulator.oracle.leaks import Leak, peak_concurrent
from simulator.runtime import EPOCH_MS

Key = tuple[str, str]
Holds = dict[str, tuple[int, int]]


DRIFT_CAUSES = ("settlement_in_flight", "settlement_lost", "duplicate_execution",
                "server_data_loss", "eviction", "unexplained")
"""Why the store's recorded spend differs from the true spend (``docs/metrics.md``)."""


SAMPLED = ("true_spend_microdollars", "recorded_spend_microdollars", "holds_live_microdollars",
           "holds_live", "leaked_holds_live_microdollars", "truth_view_microdollars",
           *(f"shortfall_{cause}_microdollars" for cause in CAUSES),
           "conservation_drift_microdollars",
           *(f"drift_{cause}_microdollars" for cause in DRIFT_CAUSES))
"""The per-key columns of the metrics series (the aggregate row sums them)."""


NEVER = 2**62
"""A leak end for holds the store counts until they are removed."""


def deadline_us(deadline_ms: int) -> int:
    """A hold's deadline (epoch ms on a replica clock) as virtual time."""
    return (deadline_ms - EPOCH_MS) * 1_000


@dataclass(slots=True)
class RequestTruth:
    """One request as the oracle knows it."""

    number: int
    key: Key
    estimate: int
    actual: int
    replica: int
    admitted: bool = False  # the store (or fail-open) let it in; tentative until confirmed
    confirmed: bool = False  # the gateway received that admission
    unheld: bool = False  # admitted fail-open, nothing held
    work_done: bool = False
    aborted: bool = False
    over_at: int | None = None
    settle_executed: bool = False
    hold: str = "none"  # none | held | released | expired | lost | evicted
    hold_id: str = ""
    hold_amount: int = 0
    hold_deadline_us: int = 0
    cause: str | None = None
    shortfall: int = 0
    wrongful: dict[str, int] = field(default_factory=dict)
    store_before: int = 0
    leaked_before: int = 0
    truth_before: int | None = None
    charged: int = 0
    charges: int = 0
    slack: int = 0  # estimate − actual while its settlement is on its way
    unsettled: int = 0  # spend done but not recorded, counted in ``unsettled_cause``
    unsettled_cause: str | None = None

    @property
    def truth(self) -> int:
        if not self.admitted or self.aborted:
            return 0
        return self.actual if self.work_done else self.estimate


@dataclass(slots=True)
class KeyBook:
    """One budget key: the store's record (per source) and the truth."""

    key: Key
    cap: int | None
    spent: dict[Any, int] = field(default_factory=dict)
    holds: dict[Any, Holds] = field(default_factory=dict)
    truth_view: int = 0
    settling_slack: int = 0
    true_spend: int = 0
    underrun: int = 0
    buckets: Counter = field(default_factory=Counter)
    wrongful: Counter = field(default_factory=Counter)
    open_leaks: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    leaks: list[Leak] = field(default_factory=list)
    drift: Counter = field(default_factory=Counter)  # recorded − true, by cause

    def drift_by_cause(self) -> dict[str, int]:
        """Recorded − true spend split over ``DRIFT_CAUSES``; what no cause
        explains (a migration that dropped spend, say) is ``unexplained``."""
        parts = {cause: self.drift.get(cause, 0) for cause in DRIFT_CAUSES[:-1]}
        total = sum(self.spent.values()) - self.true_spend
        parts["unexplained"] = total - sum(parts.values())
        return parts

    def store_view(self, source: Any, now_ms: int, holds_expire: bool = True) -> int:
        """What one source of record counts at ``now_ms``: spend plus live holds."""
        live = sum(a for a, d in self.holds.get(source, {}).values()
                   if d > now_ms or not holds_expire)
        return self.spent.get(source, 0) + live

    def leaked_live(self, now_us: int) -> int:
        return sum(amount for _, amount, end in self.open_leaks.values() if end > now_us)


class ScopeOracle:
    """Truth and record of one cap scope (subjects, or namespaces) of a budget
    store; see the module docstring. ``scope_of`` maps a request's
    ``(namespace, subject)`` to the key of its book in this scope."""

    def __init__(self, cap_of: Any, per_replica: bool = False,
                 scope_of: Any = None, holds_expire: bool = True) -> None:
        self.cap_of = cap_of
        self.per_replica = per_replica
        # Whether the store stops counting a hold at its deadline (the fixed
        # stores) or only once it is removed (a store that never reclaims).
        self.holds_expire = holds_expire
        self.scope_of = scope_of or (lambda key: key)
        self.books: dict[Key, KeyBook] = {}
        self.requests: dict[int, RequestTruth] = {}
        self.owner_of_id: dict[str, int] = {}
        self.counts: Counter = Counter()
        self.in_flight = 0
        self.peak_in_flight = 0

    # -- facts from the gateway and the runtime ----------------------------

    def book(self, key: Key) -> KeyBook:
        book = self.books.get(key)
        if book is None:
            book = self.books[key] = KeyBook(key, self.cap_of(key))
        return book

    def id_issued(self, reservation_id: str, request_number: int) -> None:
        if request_number >= 0:
            self.owner_of_id[reservation_id] = request_number

    def arrived(self, number: int, key: Key, estimate: int, actual: int, replica: int) -> None:
        self.counts["requests_arrived"] += 1
        key = self.scope_of(key)
        self.book(key)
        self.requests[number] = RequestTruth(number, key, estimate, actual, replica)

    def admitted(self, number: int, held: bool, now_us: int) -> None:
        request = self.requests[number]
        book = self.book(request.key)
        self.counts["requests_admitted"] += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        if not held:
            self.counts["requests_admitted_unenforced"] += 1
            request.unheld = True
            if not request.admitted:
                self._decide(book, request, now_us, source=None)
        elif not request.admitted:
            # Admitted, but no hold was ever observed (an in-process store
            # observed only after the call): decide now.
            self._decide(book, request, now_us, source=None)
        request.confirmed = True
        book.wrongful.update(request.wrongful)
        self._recount(book, request)

    def denied(self, number: int, reason: str, now_us: int) -> bool:
        """Record a denial; say whether this scope had room for the request."""
        request = self.requests[number]
        book = self.book(request.key)
        self.counts["requests_denied"] += 1
        self.counts[f"requests_denied_{reason}"] += 1
        if request.admitted:
            # The store admitted it but the answer never arrived: not admitted
            # in truth, and its hold now belongs to nothing.
            book.truth_view -= request.estimate
            request.admitted = False
            request.wrongful = {}
        request.over_at = now_us
        # Judged when the store decided (its reserve ran), else now. An ideal
        # limiter learns a request's actual spend from its settlement, so until
        # that lands it still counts the estimate.
        truth = request.truth_before
        if truth is None:
            truth = book.truth_view + book.settling_slack
        had_room = book.cap is None or truth + request.estimate <= book.cap
        if reason == "exceeded" and book.cap is not None:
            needed = request.store_before + request.estimate
            if needed > book.cap >= needed - request.leaked_before:
                self.counts["denials_caused_by_leaked_holds"] += 1
        self._maybe_leak(book, request, now_us)
        self._recount(book, request)
        return had_room

    def completed(self, number: int, now_us: int) -> None:
        request = self.requests[number]
        book = self.book(request.key)
        self.counts["requests_completed"] += 1
        request.work_done = True
        book.truth_view += request.actual - request.estimate
        book.true_spend += request.actual
        book.underrun += max(0, request.actual - request.estimate)
        if request.admitted and not request.settle_executed:
            request.slack = max(0, request.estimate - request.actual)
            book.settling_slack += request.slack
        self._recount(book, request)

    def settled(self, number: int, now_us: int) -> None:
        request = self.requests[number]
        self.counts["requests_settled"] += 1
        self.in_flight -= 1
        request.over_at = now_us
        self._maybe_leak(self.book(request.key), request, now_us)
        self._recount(self.book(request.key), request)

    def aborted(self, number: int, now_us: int) -> None:
        """The request's replica died under it: its work stops, it spends nothing."""
        request = self.requests[number]
        if request.over_at is not None:
            return
        book = self.book(request.key)
        self.counts["requests_aborted_by_crash"] += 1
        if request.confirmed:
            self.in_flight -= 1
        if request.admitted and not request.work_done:
            book.truth_view -= request.estimate
        request.aborted = True
        request.over_at = now_us
        self._maybe_leak(book, request, now_us)
        self._recount(book, request)

    # -- facts from the store's record -------------------------------------

    def observe(self, key: Key, source: Any, now_us: int, tag: int, how: str,
                spent: int | None = None, holds: Holds | None = None) -> None:
        """The store's record of ``key`` at ``source`` after a change.

        ``tag`` is the request whose command caused it (-1: none); ``how`` is
        ``command``, ``key_expired``, ``data_loss`` or ``evicted``.
        """
        key = self.scope_of(key)
        book = self.book(key)
        request = self.requests.get(tag)
        if request is not None and request.key == key and how == "command":
            now_ms = EPOCH_MS + now_us // 1_000
            request.store_before = book.store_view(source, now_ms, self.holds_expire)
            request.leaked_before = book.leaked_live(now_us)
            request.truth_before = book.truth_view + book.settling_slack
        if holds is not None:
            old = book.holds.get(source, {})
            for rid in old.keys() - holds.keys():
                self._hold_removed(book, rid, old[rid], now_us, tag, how)
            for rid in sorted(holds.keys() - old.keys()):
                self._hold_created(book, rid, holds[rid], now_us, source)
            book.holds[source] = dict(holds)
        if spent is not None:
            delta = spent - book.spent.get(source, 0)
            book.spent[source] = spent
            if delta > 0 and request is not None and request.key == key and how == "command":
                self._charged(book, request, delta)
            elif delta < 0 and how != "migration":
                # Recorded spend went down: the store lost it (restart,
                # failover, eviction, a replica's memory) or credited it back.
                cause = {"data_loss": "server_data_loss", "evicted": "eviction"}.get(how)
                if cause is None:
                    cause = "eviction" if self.per_replica else "duplicate_execution"
                book.buckets[cause] += -delta
                book.drift[cause] += delta
                self.counts[f"spend_lost_to_{cause}_microdollars"] += -delta

    def source_lost(self, source: Any, now_us: int) -> None:
        """A source of record vanished with its state (a crashed replica's memory)."""
        for key, book in self.books.items():
            if source in book.spent or source in book.holds:
                self.observe(key, source, now_us, -1, "data_loss", spent=0, holds={})
                book.spent.pop(source, None)
                book.holds.pop(source, None)

    def _charged(self, book: KeyBook, request: RequestTruth, delta: int) -> None:
        request.charged += delta
        request.charges += 1
        request.settle_executed = True
        if request.charges > 1:
            self.counts["duplicate_settlements_executed"] += 1
            book.drift["duplicate_execution"] += delta
        self._recount(book, request)

    def _hold_created(self, book: KeyBook, rid: str, hold: tuple[int, int], now_us: int,
                      source: Any) -> None:
        amount, deadline_ms = hold
        number = self.owner_of_id.get(rid, -1)
        request = self.requests.get(number)
        self.counts["holds_created"] += 1
        if request is None:
            self._open_leak(book, rid, amount, now_us, deadline_us(deadline_ms))
            return
        request.hold, request.hold_id, request.hold_amount = "held", rid, amount
        request.hold_deadline_us = deadline_us(deadline_ms)
        if not request.admitted and request.over_at is None:
            self._decide(book, request, now_us, source)
        if request.over_at is not None:
            self._open_leak(book, rid, amount, now_us, deadline_us(deadline_ms))
        self._recount(book, request)

    def _hold_removed(self, book: KeyBook, rid: str, hold: tuple[int, int], now_us: int,
                      tag: int, how: str) -> None:
        self._close_leak(book, rid, now_us)
        request = self.requests.get(self.owner_of_id.get(rid, -1))
        if request is None or request.hold_id != rid:
            return
        if how == "command" and tag == request.number:
            # Its own settlement released it. Whether the spend was charged is
            # the counter's business: a store that releases and charges in
            # two steps can do the first without the second.
            request.hold = "released"
        elif how in ("data_loss", "evicted"):
            request.hold = "lost" if how == "data_loss" else "evicted"
            self.counts[f"holds_lost_to_{how}"] += 1
        else:
            request.hold = "expired"
            if request.over_at is None and not request.settle_executed:
                self.counts["premature_expiries"] += 1
                self.counts["premature_expiry_microdollars"] += request.hold_amount
        self._recount(book, request)

    # -- the bookkeeping ----------------------------------------------------

    def _decide(self, book: KeyBook, request: RequestTruth, now_us: int, source: Any) -> None:
        """The store admitted ``request`` now: was that what an ideal limiter
        would have done, and if not, whose fault was it?"""
        request.admitted = True
        estimate = request.estimate
        if book.cap is not None and book.truth_view + estimate > book.cap:
            excess = min(estimate, book.truth_view + estimate - book.cap)
            if request.unheld:
                request.wrongful = {"fail_open_admission": excess}
            else:
                weights = {cause: amount for cause, amount in book.buckets.items() if amount > 0}
                if self.per_replica and source is not None:
                    now_ms = EPOCH_MS + now_us // 1_000
                    unseen = book.truth_view - book.store_view(source, now_ms,
                                                               self.holds_expire)
                    weights["per_replica_ledger"] = max(0, unseen - sum(weights.values()))
                request.wrongful = apportion(excess, weights)
            self.counts["wrongful_admissions"] += 1
        book.truth_view += estimate

    def _recount(self, book: KeyBook, request: RequestTruth) -> None:
        """Move ``request``'s shortfall to the bucket of its current cause."""
        if request.slack and (request.settle_executed or request.over_at is not None):
            book.settling_slack -= request.slack
            request.slack = 0
        truth = request.truth
        cause: str | None = None
        shortfall = 0
        if request.admitted and not request.settle_executed:
            if request.unheld:
                held = request.hold_amount if request.hold == "held" else 0
                cause, shortfall = "fail_open_admission", truth - held
            elif request.hold == "held":
                cause, shortfall = "estimate_underrun", truth - request.hold_amount
            elif request.hold == "expired":
                lost_settlement = request.work_done and request.over_at is not None
                cause = "settlement_lost" if lost_settlement else "hold_expired_while_running"
                shortfall = truth
            elif request.hold == "released":
                cause, shortfall = "settlement_lost", truth
            elif request.hold == "lost":
                cause, shortfall = "server_data_loss", truth
            elif request.hold == "evicted":
                cause, shortfall = "eviction", truth
        self._recount_unsettled(book, request)
        if request.cause is not None:
            book.buckets[request.cause] -= request.shortfall
        if cause is not None:
            book.buckets[cause] += shortfall
        request.cause, request.shortfall = cause, shortfall

    def _recount_unsettled(self, book: KeyBook, request: RequestTruth) -> None:
        """Spend done but never recorded: its settlement is on its way, or it
        will never land (the gateway gave up on it, or died holding it)."""
        cause, amount = None, 0
        if request.admitted and request.work_done and not request.settle_executed:
            cause = "settlement_in_flight" if request.over_at is None else "settlement_lost"
            amount = request.actual
        if request.unsettled_cause is not None:
            book.drift[request.unsettled_cause] += request.unsettled
        if cause is not None:
            book.drift[cause] -= amount
        request.unsettled_cause, request.unsettled = cause, amount

    def _maybe_leak(self, book: KeyBook, request: RequestTruth, now_us: int) -> None:
        if request.hold == "held":
            self._open_leak(book, request.hold_id, request.hold_amount, now_us,
                            request.hold_deadline_us)

    def _open_leak(self, book: KeyBook, rid: str, amount: int, now_us: int,
                   end_us: int) -> None:
        if not self.holds_expire:
            end_us = NEVER  # counted until something removes it
        if end_us > now_us and rid not in book.open_leaks:
            book.open_leaks[rid] = (now_us, amount, end_us)
            self.counts["holds_leaked"] += 1

    def _close_leak(self, book: KeyBook, rid: str, now_us: int) -> None:
        leak = book.open_leaks.pop(rid, None)
        if leak is not None:
            start, amount, end = leak
            book.leaks.append(Leak(book.key, start, min(end, max(start, now_us)), amount))

    # -- results ------------------------------------------------------------

    def sample(self, now_us: int, per_key: bool) -> list[dict[str, Any]]:
        """The state of every key now (and of them all, ``key == "*"``), for
        the metrics time series. Reads only the oracle's own books."""
        now_ms = EPOCH_MS + now_us // 1_000
        total: Counter = Counter({column: 0 for column in SAMPLED})
        total["keys_over_cap"] = 0
        rows = []
        worst_ratio = 0.0
        for (namespace, subject), book in self.books.items():
            row = dict.fromkeys(SAMPLED, 0)
            row.update({
                "true_spend_microdollars": book.true_spend,
                "recorded_spend_microdollars": sum(book.spent.values()),
                "holds_live_microdollars": sum(
                    book.store_view(source, now_ms, self.holds_expire) - spent
                    for source, spent in ((source, book.spent.get(source, 0))
                                          for source in book.holds)),
                "holds_live": sum(1 for holds in book.holds.values()
                                  for _, deadline in holds.values()
                                  if deadline > now_ms or not self.holds_expire),
                "leaked_holds_live_microdollars": book.leaked_live(now_us),
                "truth_view_microdollars": book.truth_view,
            })
            for cause in CAUSES:
                row[f"shortfall_{cause}_microdollars"] = book.buckets.get(cause, 0)
            row["conservation_drift_microdollars"] = (row["recorded_spend_microdollars"]
                                                      - book.true_spend)
            for cause, amount in book.drift_by_cause().items():
                row[f"drift_{cause}_microdollars"] = amount
            total.update(row)
            if book.cap:
                over = max(0, book.true_spend - book.cap) / book.cap
                worst_ratio = max(worst_ratio, over)
                total["keys_over_cap"] += over > 0
            if per_key:
                rows.append({"time_us": now_us, "namespace": namespace, "subject": subject,
                             **row})
        aggregate = {"time_us": now_us, "namespace": "*", "subject": "*", **total,
                     "cap_overshoot_max_ratio": worst_ratio,
                     "requests_in_flight": self.in_flight}
        for name in ("requests_admitted", "requests_denied", "premature_expiries",
                     "holds_leaked", "wrongful_admissions"):
            aggregate[name] = self.counts.get(name, 0)
        return [aggregate, *rows]

    def summary(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        """Every budget metric, from what happened (see docs/metrics.md)."""
        for key, book in self.books.items():
            for rid, (start, amount, end) in list(book.open_leaks.items()):
                book.leaks.append(Leak(key, start, min(end, end_us), amount))
                if end > end_us:
                    self.counts["holds_still_leaked_at_end"] += 1
                    self.counts["leaked_microdollars_at_end"] += amount
                del book.open_leaks[rid]
        metrics: dict[str, Any] = {
            name: self.counts.get(name, 0) for name in (
                "requests_arrived", "requests_admitted", "requests_admitted_unenforced",
                "requests_denied", "requests_denied_exceeded",
                "requests_denied_store_unavailable", "requests_completed", "requests_settled",
                "requests_aborted_by_crash",
            )
        }
        metrics["requests_in_flight_at_end"] = self.in_flight
        metrics["requests_in_flight_peak"] = self.peak_in_flight
        metrics.update(self._spend_metrics(end_us))
        metrics.update(self._overshoot_metrics())
        metrics.update(self._hold_metrics(end_us, last_fault_us))
        metrics.update({
            "fail_closed_denials": self.counts.get("requests_denied_store_unavailable", 0),
            "denials_caused_by_leaked_holds":
                self.counts.get("denials_caused_by_leaked_holds", 0),
        })
        return metrics

    def _spend_metrics(self, end_us: int) -> dict[str, Any]:
        true_total = sum(book.true_spend for book in self.books.values())
        recorded = {key: sum(book.spent.values()) for key, book in self.books.items()}
        drifts = [recorded[key] - book.true_spend for key, book in self.books.items()]
        end_ms = EPOCH_MS + end_us // 1_000
        return {
            "keys_total": len(self.books),
            "true_spend_microdollars_total": true_total,
            "recorded_spend_microdollars_total": sum(recorded.values()),
            "conservation_drift_microdollars_total": sum(drifts),
            "conservation_undercount_microdollars_total": -sum(d for d in drifts if d < 0),
            "conservation_overcount_microdollars_total": sum(d for d in drifts if d > 0),
            **{f"conservation_drift_by_{cause}_microdollars": sum(
                book.drift_by_cause()[cause] for book in self.books.values())
               for cause in DRIFT_CAUSES},
            "holds_outstanding_microdollars_at_end": sum(
                book.store_view(source, end_ms, self.holds_expire) - book.spent.get(source, 0)
                for book in self.books.values() for source in book.holds),
        }

    def _overshoot_metrics(self) -> dict[str, Any]:
        by_cause: Counter = Counter()
        worst_ratio: float | None = None
        total = over = 0
        for book in self.books.values():
            if book.cap is None:
                continue
            excess = max(0, book.true_spend - book.cap)
            ratio = excess / book.cap if book.cap else float(excess > 0)
            worst_ratio = max(worst_ratio or 0.0, ratio)
            if excess:
                over += 1
                total += excess
                weights = dict(book.wrongful)
                weights["estimate_underrun"] = weights.get("estimate_underrun", 0) + book.underrun
                by_cause.update(apportion(excess, weights))
        capped = any(book.cap is not None for book in self.books.values())
        metrics: dict[str, Any] = {
            "cap_overshoot_max_ratio": round(worst_ratio, 9) if capped else None,
            "cap_overshoot_microdollars_total": total if capped else None,
            "keys_over_cap": over if capped else None,
        }
        for cause in CAUSES:
            metrics[f"cap_overshoot_by_{cause}_microdollars"] = by_cause.get(cause, 0)
        metrics["wrongful_admissions"] = self.counts.get("wrongful_admissions", 0)
        return metrics

    def _hold_metrics(self, end_us: int, last_fault_us: int | None) -> dict[str, Any]:
        leaks = [leak for book in self.books.values() for leak in book.leaks]
        peak_share = 0.0
        for book in self.books.values():
            if book.cap and book.leaks:
                peak_share = max(peak_share, peak_concurrent(book.leaks) / book.cap)
        last_leak_end = max((leak.end_us for leak in leaks), default=None)
        converged = self.counts.get("holds_still_leaked_at_end", 0) == 0
        convergence_us: int | None = 0
        if last_leak_end is not None and last_fault_us is not None:
            convergence_us = max(0, last_leak_end - last_fault_us) if converged else None
        return {
            "holds_leaked": self.counts.get("holds_leaked", 0),
            "leaked_hold_microdollar_seconds": round(
                sum(leak.microdollar_seconds for leak in leaks), 3),
            "leaked_hold_peak_share_of_cap": round(peak_share, 9),
            "holds_still_leaked_at_end": self.counts.get("holds_still_leaked_at_end", 0),
            "premature_expiries": self.counts.get("premature_expiries", 0),
            "premature_expiry_microdollars": self.counts.get("premature_expiry_microdollars", 0),
            "holds_lost_to_data_loss": self.counts.get("holds_lost_to_data_loss", 0),
            "holds_lost_to_eviction": self.counts.get("holds_lost_to_evicted", 0),
            "spend_lost_to_data_loss_microdollars":
                self.counts.get("spend_lost_to_server_data_loss_microdollars", 0),
            "spend_lost_to_eviction_microdollars":
                self.counts.get("spend_lost_to_eviction_microdollars", 0),
            "duplicate_settlements_executed":
                self.counts.get("duplicate_settlements_executed", 0),
            "convergence_after_faults_us": convergence_us,
        }
