"""The budget oracle: the truth of every request against the store's record.

The simulator knows the truth (which requests ran, what each really spent)
and sees the store's record exactly: after every command the server reports
the post-state of the keys it touched (``observe``), tagged with the request
the command was sent for. Every metric follows from those two streams of
facts; none is assumed. ``docs/metrics.md`` defines each one.

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
* **Blame comes from what the lab did, never from the store's record.** A hold
  belongs to the request whose command wrote it (not to whoever the store's
  id scheme points at). It *expired* only if it disappeared at or after its
  honest deadline — the writer's clock when its request arrived plus the
  configured reservation TTL — by a reclaim (judged on the reclaiming
  replica's clock) or a key expiry; any other removal is the store's own.
  A settlement counts as *lost* only if the lab lost, refused or timed out a
  message of that request, or crashed its replica. Damage nothing the lab
  did explains is ``store_logic``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.engine.runtime import EPOCH_MS
from simulator.families.axond_budget.causes import (
    CAUSES,
    CONFIG_CHANGE,
    DRIFT_CAUSES,
    LEAK_CAUSES,
    OVERCOUNT_CAUSES,
    OVERSHOOT_CAUSES,
    RECONFIGURED,
    UNDERCOUNT_CAUSES,
)
from simulator.families.axond_budget.hold_index import HoldIndex, changed_holds, reindex
from simulator.families.axond_budget.leaks import Leak, peak_concurrent
from simulator.net.links import CALLER_MAY_NOT_KNOW
from simulator.plugin.attribution import STORE_LOGIC, apportion, dominant
from simulator.plugin.contracts import NO_FAULT, Exposures, exposure
from simulator.plugin.protocol import MIGRATION

MIGRATED = "migration on migrate"
"""What exposed a migration's wrong carry when no fault hit it and no fleet
ran beside it: the operator's migration itself, a path a fault-free run
takes once."""


Key = tuple[str, str]
Holds = dict[str, tuple[int, int]]




LOSS_HOW = {"data_loss": ("lost", "server_data_loss"), "evicted": ("evicted", "eviction"),
            "replica_crash": ("crashed", "crashed_replica_ledger")}
"""How a hold or spend vanished without a command: the hold's state, and the cause."""

MIGRATED_HOLD = "dropped_by_migration"
"""A hold's state once the operator's migration dropped it with its request
still running: the migration runs with the fleet stopped."""

SHARED_KEY = "replicas_sharing_key"
"""What the lab did that exposes a store whose replicas overwrite or remove
each other's live holds (ids that collide across the fleet): it ran requests
of one key on several replicas. The lease oracle names the same condition."""

EVICTED_IN_USE = "evicted_in_use"
"""A per-replica store evicted a ledger its replica had called for within the
idle TTL (a refusal included): not idle, so the store's (seed 001:448-451)."""
EVICTED_IN_USE_EXPOSURE = "eviction"
"""What exposes it: the lab's idle eviction (``idle_ttl``, ``max_subjects``)."""


SAMPLED = ("true_spend_microdollars", "recorded_spend_microdollars", "holds_live_microdollars",
           "holds_live", "leaked_holds_live_microdollars", "truth_view_microdollars",
           *(f"shortfall_{cause}_microdollars" for cause in CAUSES),
           "conservation_drift_microdollars",
           *(f"drift_{cause}_microdollars" for cause in DRIFT_CAUSES))
"""The per-key columns of the metrics series (the aggregate row sums them)."""


STORE_LOGIC_PARTS = {
    "cap_overshoot_microdollars_total": "cap_overshoot_by_{cause}_microdollars",
    "conservation_drift_microdollars_total": "conservation_drift_by_{cause}_microdollars",
    "conservation_undercount_microdollars_total":
        "conservation_undercount_by_{cause}_microdollars",
    "conservation_overcount_microdollars_total": "conservation_overcount_by_{cause}_microdollars",
    "leaked_hold_microdollar_seconds": "leaked_hold_microdollar_seconds_by_{cause}",
    "wrongful_admissions": "wrongful_admissions_by_{cause}",
}
"""Each per-scope invariant and the name of its parts by cause (``invariants``)."""


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
    shortfall_exposure: str = NO_FAULT  # what exposed a store_logic shortfall
    unsettled_exposure: str = NO_FAULT  # what exposed a store_logic unsettled spend
    wrongful: dict[str, int] = field(default_factory=dict)
    wrongful_own: int = 0  # of its store_logic excess, what its own record counted wrong
    wrongful_gap: tuple[str, int] | None = None  # the rest: the gap's exposure, and how much

    def wrongful_exposure(self) -> dict[str, int]:
        """Its wrongful excess filed ``store_logic``, by what exposed it, read
        when the run ends (a fault the lab tells of after the admission counts)."""
        gap, rest = self.wrongful_gap or (NO_FAULT, 0)
        own = self.exposure if self.exposure != NO_FAULT else gap
        found: Counter = Counter({gap: rest})
        found[own] += self.wrongful_own
        return {exposed: amount for exposed, amount in found.items() if amount}
    store_before: int = 0
    leaked_before: int = 0
    truth_before: int | None = None
    charged: int = 0
    charges: int = 0
    slack: int = 0  # estimate − actual while its settlement is on its way
    unsettled: int = 0  # spend done but not recorded, counted in ``unsettled_cause``
    unsettled_cause: str | None = None
    # What the network did to it. Shared empty defaults: a run keeps every
    # request, and most are never touched by a fault or a leak.
    message_faults: frozenset[str] = frozenset()
    fault_calls: tuple[tuple[str, str], ...] = ()  # (fault, the call it hit), first first
    carry: str = ""  # a migration "carried" its unrecorded spend into this scope, or "lost" it
    noted: bool = False  # where the store's damage began was judged at it
    arrived_us: int = 0
    cap_used: int | None = None  # the cap its replica ran with (the scenario's, or reconfigured)
    ttl_ms: int | None = None  # the hold TTL its replica ran with
    reconfigured: bool = False  # its replica ran settings an operator's reconfigure changed
    ttl_reconfigured: bool = False  # ... and the hold TTL among them
    view_at_decision: int = 0  # the truth view of its key when the store admitted it
    honest_deadline_ms: int = 0  # the writer's clock at arrival + the configured TTL
    latest_deadline_us: int = 0  # the writer's clock when its hold was written + the TTL
    settled_elsewhere: bool = False  # its settlement ran in another scope of the store
    settled_elsewhere_at: int | None = None  # when it first did
    origin: Any = None  # its key before ``scope_of`` (the subject's, in a namespace scope)
    leaked_before_by_cause: Mapping[str, int] | None = None  # None: no leak then
    recorded_here: bool = False  # a command of it touched this scope's record
    unfenced: str = ""  # served by a boot a sound store refuses: what exposed that boot

    @property
    def lost_by_lab(self) -> bool:
        """The lab crashed its replica or lost, refused or timed out a message of it."""
        return self.aborted or not self.message_faults.isdisjoint(CALLER_MAY_NOT_KNOW)

    @property
    def misaligned(self) -> bool:
        """A reply it acted on was another call's: the lab misaligned its
        multiplexed connection (``simulator.net.connections``)."""
        return "misaligned_reply" in self.message_faults

    @property
    def duplicated(self) -> bool:
        """The lab re-sent one of its commands (a driver retry), so a command
        may have run twice. The retry is known before its second execution."""
        return not self.message_faults.isdisjoint(("call_retried", "duplicate_execution"))

    @property
    def exposure(self) -> str:
        """What the lab did to it, in words, for store-logic damage it exposed:
        the first message fault and the call it hit, or its replica's crash;
        for a request a boot no sound store allows served, what let it boot."""
        if self.unfenced:
            return self.unfenced
        if self.fault_calls:
            return exposure(*self.fault_calls[0])
        if self.aborted:
            return "replica_crash"
        if self.reconfigured:
            # Served with settings the operator changed: the change is what
            # took the store down a path a run without it never takes.
            return RECONFIGURED
        # Its hold reached its deadline while it ran: a pause or a delay the
        # lab caused (the contract's hold_expired_while_running).
        return "hold_expired_while_running" if self.hold == "expired" else NO_FAULT

    @property
    def leak_exposure(self) -> str:
        """What exposed the part of its leaked hold the store is to blame for:
        counted past the deadline its own replica's TTL allows, that is the
        operator's TTL change (a store that ignores it) once it had one, else
        what the lab did to it."""
        if self.ttl_reconfigured and self.leak_cause() != STORE_LOGIC:
            return RECONFIGURED
        return self.exposure

    def leak_cause(self) -> str:
        """Why its hold outlives it, from what the lab did to it."""
        if self.aborted:
            return "replica_crash"
        if self.settled_elsewhere:
            # The store ran its settlement (in another scope), so the lab
            # lost nothing of it: the hold left here is the store's.
            return STORE_LOGIC
        if self.lost_by_lab:
            return "settlement_lost" if self.confirmed else "message_lost"
        return STORE_LOGIC

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
    """Per source, its holds as last observed; changed only through
    ``replace_holds`` and ``drop_source``, which keep ``hold_index`` in step."""
    hold_index: dict[Any, HoldIndex] = field(default_factory=dict)
    """Per source, its holds by deadline (``store_view`` without a pass over them)."""
    truth_view: int = 0
    settling_slack: int = 0
    true_spend: int = 0
    underrun: int = 0
    buckets: Counter = field(default_factory=Counter)
    wrongful: Counter = field(default_factory=Counter)
    open_leaks: dict[str, tuple[int, int, int, str, int, str]] = field(default_factory=dict)
    """Per hold id: start, amount, end, cause, the deadline past which a sound
    store stops counting it (the contract's bound), and what exposed it."""
    leaks: list[Leak] = field(default_factory=list)
    drift: Counter = field(default_factory=Counter)  # recorded − true, by cause
    hold_owner: dict[tuple[Any, str], int] = field(default_factory=dict)
    """The request whose command wrote each hold, by (source, id)."""
    migration_net: int = 0
    """What operator migrations added to (or took from) the recorded spend."""
    migration_interrupted: int = 0
    """Spend a migration had taken off a ledger when the lab interrupted it."""
    carry_due: int = 0
    migration_carried: int = 0
    """What migrations carried in since their carry was last judged."""
    """Spend this scope's record did not keep (``scope_not_enforced``) that a
    migration which ran after it should have carried in."""
    bucket_exposure: Counter = field(default_factory=Counter)
    """The ``store_logic`` shortfall bucket by what exposed it."""
    drift_exposure: Counter = field(default_factory=Counter)
    """The ``store_logic`` drift by what exposed it (signed)."""
    store_wrongful: list = field(default_factory=list)
    """The requests admitted with a ``store_logic`` part of excess."""
    unfenced_spent: Counter = field(default_factory=Counter)
    """Per source, the spend requests served by a boot no sound store allows
    (``ScopeOracle.unfenced``) recorded there and no migration has taken off."""

    def wrongful_exposure(self) -> Counter:
        """The ``store_logic`` part of its wrongful admissions' excess by what exposed it."""
        found: Counter = Counter()
        for request in self.store_wrongful:
            found.update(request.wrongful_exposure())
        return found

    def drift_by_cause(self, carried_into: bool = True) -> dict[str, int]:
        """Recorded − true spend split over ``DRIFT_CAUSES``. A migration that
        carried spend into a scope no earlier layout recorded made up for
        ``scope_not_enforced``; spend a migration took and never put back is
        the interruption's, up to what the lab interrupted mid-move, and the
        store's beyond. What no fact explains is the store's."""
        parts = {cause: self.drift.get(cause, 0) for cause in DRIFT_CAUSES}
        # A migration carries what the old layout kept (seed 000:567-574): what
        # it should have carried and did not is the store's; what it carried
        # made up for the scope the old layout did not keep. An interrupted
        # run loses nothing (000:183-187), and the lab re-runs it to the end.
        missing = max(0, self.carry_due - max(0, self.migration_net))
        if not carried_into:
            # A scope the old layout kept (subjects): a migration only moves
            # its spend, so any net change, up or down, is the store's.
            parts[STORE_LOGIC] += self.migration_net
        elif self.migration_net > 0:
            # Carried more than there was to carry: counted twice, the store's.
            surplus = max(0, self.migration_net - self.carry_due)
            parts["scope_not_enforced"] += self.migration_net + missing - surplus
            parts[STORE_LOGIC] += surplus - missing
        elif self.migration_net < 0:
            parts[STORE_LOGIC] += self.migration_net
            parts["scope_not_enforced"] += missing
            parts[STORE_LOGIC] -= missing
        elif missing:
            parts["scope_not_enforced"] += missing
            parts[STORE_LOGIC] -= missing
        total = sum(self.spent.values()) - self.true_spend
        parts[STORE_LOGIC] += total - sum(parts.values())
        return parts

    def store_view(self, source: Any, now_ms: int, holds_expire: bool = True) -> int:
        """What one source of record counts at ``now_ms``: spend plus live holds."""
        index = self.hold_index.get(source)
        if index is None:
            return self.spent.get(source, 0)
        live = index.live(self.holds[source], now_ms) if holds_expire else index.total
        return self.spent.get(source, 0) + live

    def replace_holds(self, source: Any, holds: Holds, changed: set[str]) -> None:
        """``source``'s holds are now ``holds`` (``changed``: the ids that
        differ from before, as ``changed_holds`` found them)."""
        index = self.hold_index.get(source)
        if index is None:
            index = self.hold_index[source] = HoldIndex()
        reindex(index, self.holds.get(source, {}), holds, changed)
        self.holds[source] = dict(holds)

    def drop_source(self, source: Any) -> None:
        """``source`` keeps no record of this key any more."""
        self.spent.pop(source, None)
        self.holds.pop(source, None)
        self.hold_index.pop(source, None)

    def leaked_live(self, now_us: int) -> int:
        return sum(leak[1] for leak in self.open_leaks.values() if leak[2] > now_us)

    def leaked_live_by_cause(self, now_us: int) -> Mapping[str, int] | None:
        """Holds leaked and still counted now, by cause; past its contract's
        deadline a leaked hold is the store's (``store_logic``)."""
        if not self.open_leaks:
            return None
        by_cause: Counter = Counter()
        for _, amount, end, cause, due, _ in self.open_leaks.values():
            if end > now_us:
                by_cause[cause if now_us < due else STORE_LOGIC] += amount
        return by_cause

    def overdue_exposure(self, now_us: int) -> str:
        """What exposed the leaked holds the store is to blame for counting now:
        past their deadline, or left by the store itself."""
        weights: Counter = Counter()
        for _, amount, end, cause, due, exposed in self.open_leaks.values():
            if due <= now_us < end or (cause == STORE_LOGIC and now_us < end):
                weights[exposed or cause] += amount
        return dominant(weights, NO_FAULT)


class ScopeOracle:
    """Truth and record of one cap scope (subjects, or namespaces) of a budget
    store; see the module docstring. ``scope_of`` maps a request's
    ``(namespace, subject)`` to the key of its book in this scope."""

    def __init__(self, cap_of: Any, per_replica: bool = False,
                 scope_of: Any = None, holds_expire: bool = True,
                 reservation_ttl_ms: int | None = None, clocks: list | None = None,
                 absent_causes: frozenset[str] = frozenset(),
                 fail_open_allowed: bool = True, cap_setting: str = "") -> None:
        self.cap_of = cap_of
        self.cap_setting = cap_setting
        """The store setting that holds this scope's cap (an operator may reload it)."""
        self.replica_caps: dict[int, int | None] = {}
        self.replica_ttls: dict[int, int] = {}
        """The cap and the hold TTL of each replica an operator reconfigured
        (``settings_in_force``): its requests are judged by them."""
        self.reconfigured_replicas: set[int] = set()
        self.caps_changed = False
        self.per_replica = per_replica
        # Whether the store stops counting a hold at its deadline (the fixed
        # stores) or only once it is removed (a store that never reclaims).
        self.holds_expire = holds_expire
        self.scope_of = scope_of or (lambda key: key)
        # The TTL the scenario configured and every replica's clock (filled
        # by the run as it builds the fleet): together they say when a hold
        # may honestly stop counting, whatever deadline the store wrote.
        self.reservation_ttl_ms = reservation_ttl_ms
        self.clocks = clocks if clocks is not None else []
        # Causes this scope cannot have (a namespace scope has no per-replica
        # ledger; a subject scope is always enforced): not in its summary.
        self.absent_causes = absent_causes
        self.books: dict[Key, KeyBook] = {}
        self.requests: dict[int, RequestTruth] = {}
        self.counts: Counter = Counter()
        # Spend the operator's latest migration command took off ledgers, at
        # its time: what an interruption right then leaves in flight.
        self.migration_taking: list[tuple[KeyBook, int]] = []
        self.migration_taking_at = -1
        # When the operator's latest migration last moved spend in this scope,
        # and what exposed a carry it got wrong (a kill, a live fleet beside it).
        self.last_migration_us: int | None = None
        self.migration_exposure = NO_FAULT
        self.exposures = Exposures()
        """Store-logic damage by the fault that exposed it, and where it began."""
        self.carried_into = "scope_not_enforced" not in absent_causes
        """A migration carries spend into this scope's record (namespaces: v1
        keeps none), rather than moving it within it (subjects)."""
        self.fail_open_allowed = fail_open_allowed
        """The scenario configured fail-open (``on_unavailable = "allow"``): an
        unheld admission is the policy's, not the store's."""
        self.store_wrongful_admissions: list[RequestTruth] = []
        """Wrongful admissions whose largest part is ``store_logic``."""
        self.partings: list[tuple[int, RequestTruth, str]] = []
        """Store-logic partings of the observation being read (see ``observe``)."""
        self.migration_unsettled = False
        """A migration moved spend in this scope since its carry was last judged."""
        self.unfenced_exposure = ""
        """What let the latest replica no sound store lets boot serve (``unfenced``)."""
        self.emptied_sources: set[Any] = set()
        """The sources of record (layouts) the operator's migrations took spend off."""
        self.migration_owed_at: int | None = None
        """When a migration last took spend off another scope's old ledgers
        that it owes this scope (``migration_took_elsewhere``)."""
        self.migration_took_at: dict[Key, int] = {}
        """When a migration last took each key's spend off another scope's old
        ledger: spend landing there after that, it could not carry."""
        self.in_flight = 0
        self.peak_in_flight = 0

    # -- facts from the gateway and the runtime ----------------------------

    def book(self, key: Key) -> KeyBook:
        book = self.books.get(key)
        if book is None:
            book = self.books[key] = KeyBook(key, self.cap_of(key))
        return book

    def clock_ms(self, replica: int, now_us: int) -> int:
        """Replica ``replica``'s clock at true time ``now_us``."""
        if 0 <= replica < len(self.clocks):
            return self.clocks[replica].now_ms(now_us)
        return EPOCH_MS + now_us // 1_000

    def message_fault(self, number: int, what: str, call: str = "") -> None:
        """The lab lost, refused, timed out or duplicated a message of request
        ``number`` (or of the operator's migration)."""
        if number == MIGRATION:
            # What it had taken off a ledger and not yet put back is missing
            # from the record until a re-run puts it back. A sound migration
            # parks its claim and a re-run applies it (seed 000:183-187): the
            # contract allows the interruption nothing, so it is the store's.
            if what == "migration_killed" or self.migration_exposure in (NO_FAULT, MIGRATED):
                self.migration_exposure = exposure(what, call)
            taken = sum(amount for _, amount in self.migration_taking)
            if taken:
                self.exposures.parted(self.migration_taking_at, MIGRATION,
                                      f"{call or 'migrate'} by the operator: took {taken:,} "
                                      f"off the old ledgers, then {exposure(what, call)}")
            for book, amount in self.migration_taking:
                book.migration_interrupted += amount
                book.buckets[STORE_LOGIC] += amount
                book.bucket_exposure[self.migration_exposure] += amount
            self.migration_taking = []
            return
        request = self.requests.get(number)
        if request is None or what in request.message_faults:
            return
        request.message_faults = request.message_faults | {what}
        request.fault_calls = (*request.fault_calls, (what, call))
        self._recount(self.book(request.key), request)

    def settings_in_force(self, replica: int, changes: Mapping[str, Any]) -> None:
        """Replica ``replica`` now runs settings an operator changed by
        ``changes`` (field names; empty: the scenario's again)."""
        if self.cap_setting in changes:
            self.replica_caps[replica] = changes[self.cap_setting]
            self.caps_changed = True
        else:
            self.replica_caps.pop(replica, None)
        if "reservation_ttl_ms" in changes:
            self.replica_ttls[replica] = changes["reservation_ttl_ms"]
        else:
            self.replica_ttls.pop(replica, None)
        if changes:
            self.reconfigured_replicas.add(replica)
        else:
            self.reconfigured_replicas.discard(replica)

    def unfenced(self, number: int, exposed: str) -> None:
        """Request ``number`` is served by a replica that booted on the old
        layout after the operator's migration began moving spend: a sound store
        refuses that boot (its mid-migration marker, seed 000:70-75, 421-427;
        after the migration, its ``v2`` marker, 409-420), so whatever its
        admissions and its unrecorded spend cost is the store's, exposed by
        ``exposed`` (what interrupted the migration)."""
        request = self.requests.get(number)
        if request is not None and not request.unfenced:
            request.unfenced = self.unfenced_exposure = exposed
            self._recount(self.book(request.key), request)

    def arrived(self, number: int, key: Key, estimate: int, actual: int, replica: int,
                now_us: int) -> None:
        self.counts["requests_arrived"] += 1
        origin, key = key, self.scope_of(key)
        book = self.book(key)
        request = self.requests[number] = RequestTruth(number, key, estimate, actual, replica,
                                                       arrived_us=now_us, origin=origin)
        # The configuration in force on its replica: what a sound store there
        # decides by, so what it is judged by.
        request.cap_used = self.replica_caps.get(replica, book.cap)
        if request.cap_used is None:
            request.cap_used = book.cap  # a layout that keeps no such cap yet
        request.ttl_ms = self.replica_ttls.get(replica, self.reservation_ttl_ms)
        request.reconfigured = replica in self.reconfigured_replicas
        request.ttl_reconfigured = request.ttl_ms != self.reservation_ttl_ms

    def admitted(self, number: int, held: bool, now_us: int) -> None:
        request = self.requests[number]
        book = self.book(request.key)
        self.counts["requests_admitted"] += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        if held and request.hold == "none" and not request.fault_calls:
            self._expose_shared_hold(book, request, now_us)
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
        if request.misaligned and request.wrongful:
            # Admitted on another call's answer: whatever its own command
            # decided, the admission the gateway acted on was not the store's.
            request.wrongful = {"misaligned_reply": sum(request.wrongful.values())}
            request.wrongful_own, request.wrongful_gap = 0, None
        book.wrongful.update(request.wrongful)
        if request.wrongful.get(STORE_LOGIC):
            book.store_wrongful.append(request)
        if request.wrongful:
            # Counted once the gateway acts on it: a reserve whose answer was
            # lost admitted nothing.
            blame = dominant(request.wrongful)
            self.counts["wrongful_admissions"] += 1
            self.counts[f"wrongful_admissions_by_{blame}"] += 1
            if blame == STORE_LOGIC:
                self.store_wrongful_admissions.append(request)
        self._recount(book, request)

    def _expose_shared_hold(self, book: KeyBook, request: RequestTruth, now_us: int) -> None:
        """A request its store admitted held, whose reserve ran here and wrote
        no hold the oracle saw: if another replica's request holds, live, the
        very hold it would have written (its estimate, due its clock at
        arrival plus the TTL), its reserve wrote that field again under the
        same id and changed nothing. Colliding ids, exposed by the lab running
        requests of one key on several replicas."""
        if not request.recorded_here or self.per_replica or self.reservation_ttl_ms is None:
            return
        written = (request.estimate,
                   self.clock_ms(request.replica, request.arrived_us) + self.reservation_ttl_ms)
        for source, holds in book.holds.items():
            for rid, hold in holds.items():
                owner = self.requests.get(book.hold_owner.get((source, rid), -1))
                if hold == written and owner is not None and owner.replica != request.replica:
                    request.fault_calls = ((SHARED_KEY, "reserve"),)
                    self.exposures.parted(
                        now_us, request.number,
                        f"reserve on replica {request.replica} for request {request.number}: "
                        f"admitted on hold {rid}, request {owner.number}'s on replica "
                        f"{owner.replica}: one hold for two requests")
                    return

    def denied(self, number: int, reason: str, now_us: int) -> tuple[bool, str | None]:
        """Record a denial; say whether this scope had room for the request,
        and, when its record was what refused it, why it counted too much
        (``None`` when this scope's record had room)."""
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
        cap = request.cap_used
        had_room = cap is None or truth + request.estimate <= cap
        blame = self._denial_cause(book, request, reason)
        if reason == "exceeded" and cap is not None:
            needed = request.store_before + request.estimate
            if needed > cap >= needed - request.leaked_before:
                self.counts["denials_caused_by_leaked_holds"] += 1
        self._maybe_leak(book, request, now_us)
        self._recount(book, request)
        return had_room, blame

    def _denial_cause(self, book: KeyBook, request: RequestTruth, reason: str) -> str | None:
        """Why the store refused: it could not be reached (and the lab is why),
        its record counted holds leaked for a reason of the lab's or spend a
        retry charged twice, or its own decision."""
        if request.misaligned:
            return "misaligned_reply"
        if reason != "exceeded":
            # Unreachable because the lab cut it off; or, for a store in the
            # replica, refused for capacity under its configured subject bound
            # (seed 001:400-420), which it reports as unavailable.
            lab = request.lost_by_lab or self.per_replica
            return "store_unavailable" if lab else STORE_LOGIC
        cap = request.cap_used
        if cap is None or request.store_before + request.estimate <= cap:
            return None
        # Holds counted past their deadline (seed 000:77-79) that alone made
        # the difference: a sound store, which drops them, had room.
        overdue = (request.leaked_before_by_cause or {}).get(STORE_LOGIC, 0)
        if overdue and request.store_before - overdue + request.estimate <= cap:
            return STORE_LOGIC
        # Holds leaked within their contract (until their deadline) and spend
        # a retry charged twice excuse a denial; a hold counted past its
        # deadline does not (seed 000:77-79): that part is the store's.
        explained = {f"leaked_holds_{cause}": amount
                     for cause, amount in (request.leaked_before_by_cause or {}).items()
                     if cause != STORE_LOGIC}
        explained["duplicate_execution"] = max(0, book.drift.get("duplicate_execution", 0))
        counted_honestly = request.store_before - sum(explained.values())
        if counted_honestly + request.estimate > cap:
            return STORE_LOGIC
        return dominant(explained)

    def denial_exposure(self, number: int) -> str:
        """What exposed a false denial the store is blamed for: leaked holds it
        counted past their deadline, else the request's own faults."""
        request = self.requests[number]
        judged_us = (self.clock_ms(request.replica, request.arrived_us) - EPOCH_MS) * 1_000
        book = self.book(request.key)
        overdue = book.overdue_exposure(judged_us)
        if overdue != NO_FAULT:
            return overdue
        drifted = dominant({exposed: abs(amount) for exposed, amount
                            in book.drift_exposure.items()}, NO_FAULT)
        if drifted != NO_FAULT:
            return drifted
        if book.migration_net:
            return self.migration_exposure  # a migration moved spend in this book
        return request.exposure

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
                spent: int | None = None, holds: Holds | None = None) -> int:
        """The store's record of ``key`` at ``source`` after a change; the
        spend an operator's migration took off this scope's record with it.

        ``tag`` is the request whose command caused it (-1: none); ``how`` is
        ``command``, ``migration``, ``key_expired``, ``data_loss`` or ``evicted``.
        """
        if how != "migration":
            self._settle_migration()
        taken = self._observe(key, source, now_us, tag, how, spent, holds)
        self._note_partings()
        return taken

    def _note_partings(self) -> None:
        """Note the partings judged since the last note that still stand. A
        settlement reports its release and its charge in one observation: the
        two parted only if they are still apart once both are read."""
        for parted_us, request, what in self.partings:
            if STORE_LOGIC in (request.cause, request.unsettled_cause):
                self._parted(parted_us, request, what)
        self.partings = []

    def _observe(self, key: Key, source: Any, now_us: int, tag: int, how: str,
                 spent: int | None, holds: Holds | None) -> int:
        key = self.scope_of(key)
        book = self.book(key)
        request = self.requests.get(tag)
        own = request is not None and request.key == key and how == "command"
        taken = 0
        if own:
            request.recorded_here = True
            # What the store counted, as its script judged it: by the clock
            # reading its replica sent along when the request arrived.
            judged_ms = self.clock_ms(request.replica, request.arrived_us)
            request.store_before = book.store_view(source, judged_ms, self.holds_expire)
            request.leaked_before_by_cause = book.leaked_live_by_cause(
                (judged_ms - EPOCH_MS) * 1_000)
            request.leaked_before = sum((request.leaked_before_by_cause or {}).values())
            request.truth_before = book.truth_view + book.settling_slack
        if holds is not None:
            old = book.holds.get(source, {})
            changed = changed_holds(old, holds)
            for rid in old.keys() - holds.keys():
                self._hold_removed(book, rid, now_us, tag, how, source)
            if how == "command":
                # A hold rewritten under the same id by another request's
                # command (ids that collide) is the old one removed and a new
                # one written.
                for rid in sorted(rid for rid in changed
                                  if rid in old and rid in holds
                                  and book.hold_owner.get((source, rid)) != tag):
                    self._hold_removed(book, rid, now_us, tag, how, source)
                    self._hold_created(book, rid, holds[rid], now_us, source, tag, how)
            for rid in sorted(holds.keys() - old.keys()):
                self._hold_created(book, rid, holds[rid], now_us, source, tag, how)
            book.replace_holds(source, holds, changed)
        if spent is not None:
            delta = spent - book.spent.get(source, 0)
            book.spent[source] = spent
            if how == "migration":
                # A move between layouts; what it drops is judged at the end.
                book.migration_net += delta
                book.migration_carried += delta
                self._migration_moved(now_us)
                if delta < 0 and "scope_not_enforced" in self.absent_causes:  # the subject scope
                    self._migration_took(book, -delta, now_us)
                    self.emptied_sources.add(source)
                    if book.unfenced_spent[source] > spent:
                        book.unfenced_spent[source] = spent  # carried on
                    taken = -delta
                else:
                    self._migration_put_back(book, delta)
                    restored = min(delta, book.migration_interrupted)
                    book.migration_interrupted -= restored
                    book.buckets[STORE_LOGIC] -= restored
                    book.bucket_exposure[self.migration_exposure] -= restored
            elif delta > 0 and own:
                self._charged(book, request, delta, now_us, source)
            elif delta > 0 and how == "command":
                # Charged on behalf of a request of another key, or of none.
                book.drift[STORE_LOGIC] += delta
                self._store_drift(book, delta, request, now_us, "charged another key")
            elif delta < 0:
                self._spend_lost(book, -delta, how, request, now_us)
        return taken

    def _migration_moved(self, now_us: int) -> None:
        """The operator's migration moved spend in this scope now: its carry
        is judged once the fleet acts again."""
        self.last_migration_us = now_us
        self.migration_unsettled = True
        self._expose_migration()

    def _expose_migration(self) -> None:
        """What exposed a carry the operator's migration gets wrong: a fault
        that hit it (``message_fault``), a live fleet beside it, or itself."""
        if self.in_flight and self.migration_exposure in (NO_FAULT, MIGRATED):
            self.migration_exposure = "live_fleet on migrate"
        elif self.migration_exposure == NO_FAULT:
            # No fault, no live fleet: the operator's migration itself
            # is what took the store down a path it got wrong.
            self.migration_exposure = MIGRATED

    def migration_took_elsewhere(self, key: Key, now_us: int) -> None:
        """The operator's migration took ``key``'s spend off the old layout in
        another scope (its subject's v1 ledger): it owes this scope's book of
        ``key`` that carry. A migration that carries it to the ledger of a
        namespace the configuration does not name (one read off the v1 tag by
        guesswork) writes nothing this scope follows: what it took from a
        configured namespace's subjects and never brought to that namespace
        is the store's (seed 000:567-574). Judged when the run ends, unless a
        carry into this scope comes first: a sound migration adds a claim
        here only after it took it, and a live fleet may act in between."""
        self.book(self.scope_of(key))
        self.migration_owed_at = now_us
        self.migration_took_at[key] = now_us
        self._expose_migration()

    def _settle_migration(self, final: bool = False) -> None:
        """Once the fleet acts again after a migration, judge its carry: of the
        spend this scope's record never kept (``scope_not_enforced``) and that
        was over before the migration, what it carried is now counted, and
        what it did not is the store's (seed 000:567-574). A carry owed here
        by a migration that wrote nothing here is judged at the end
        (``final``)."""
        owed = self.migration_owed_at
        if final and owed is not None and owed > (self.last_migration_us or -1):
            # It took spend after its last carry here, and never brought it.
            self.last_migration_us, self.migration_unsettled = owed, True
        if not self.migration_unsettled:
            return
        self.migration_unsettled = False
        for request in self.requests.values():
            unrecorded = request.cause == "scope_not_enforced" or (
                request.unfenced and not request.recorded_here and not request.carry)
            if (not unrecorded or request.over_at is None
                    or request.over_at > (self.last_migration_us or 0)
                    or self._spent_after_taken(request)):
                continue
            book = self.books[request.key]
            carried = min(request.shortfall, max(0, book.migration_carried))
            book.migration_carried -= carried
            request.carry = "carried" if carried == request.shortfall else "lost"
            self._recount(book, request)
        for book in self.books.values():
            book.migration_carried = 0

    def _spent_after_taken(self, request: RequestTruth) -> bool:
        """A stray's spend (a replica the operator left on the old layout,
        not one the store let boot there) that landed on its old ledger after
        the migration last took that ledger's spend: no migration could carry
        it, so it stays the stray's (``scope_not_enforced``), not the store's."""
        taken = self.migration_took_at.get(request.origin)
        landed = (request.settled_elsewhere_at if request.settled_elsewhere_at is not None
                  else request.over_at)
        return (not request.unfenced and taken is not None and landed is not None
                and landed > taken)

    def _migration_took(self, book: KeyBook, amount: int, now_us: int) -> None:
        if now_us != self.migration_taking_at:
            self.migration_taking, self.migration_taking_at = [], now_us
        self.migration_taking.append((book, amount))

    def _migration_put_back(self, book: KeyBook, amount: int) -> None:
        """The migration added ``amount`` to ``book`` in the new layout: of what
        it had taken off the old one, that much is in flight no more, and an
        interruption from now on leaves it carried, not lost."""
        in_flight = []
        for taken_book, taken in self.migration_taking:
            if taken_book is book:
                back = min(taken, max(0, amount))
                taken, amount = taken - back, amount - back
            if taken:
                in_flight.append((taken_book, taken))
        self.migration_taking = in_flight

    def _spend_lost(self, book: KeyBook, amount: int, how: str,
                    request: RequestTruth | None = None, now_us: int = 0) -> None:
        """Recorded spend went down: the lab lost it (a restart, a failover, a
        replica's memory), a per-replica store evicted an idle ledger as
        configured (observed as an eviction), or the store took it back by
        itself: a command that lowers a counter is the store's."""
        cause = LOSS_HOW[how][1] if how in LOSS_HOW else STORE_LOGIC
        book.buckets[cause] += amount
        book.drift[cause] -= amount
        self.counts[f"spend_lost_to_{cause}_microdollars"] += amount
        if cause == STORE_LOGIC:
            exposed = (EVICTED_IN_USE_EXPOSURE if how == EVICTED_IN_USE
                       else request.exposure if request is not None else NO_FAULT)
            book.bucket_exposure[exposed] += amount
            self._store_drift(book, -amount, request, now_us, f"took back {amount:,}", exposed)

    def _store_drift(self, book: KeyBook, amount: int, request: RequestTruth | None,
                     now_us: int, what: str, exposed: str | None = None) -> None:
        """``amount`` of drift filed ``store_logic`` now, by ``request``'s command."""
        if exposed is None:
            exposed = request.exposure if request is not None else NO_FAULT
        book.drift_exposure[exposed] += amount
        self._parted(now_us, request, what)

    def _parted(self, now_us: int, request: RequestTruth | None, what: str) -> None:
        """The store's record and the truth parted now, after ``request``'s call."""
        if request is None:
            self.exposures.parted(now_us, -1, f"a command of no request: {what}")
            return
        call = request.fault_calls[0][1] if request.fault_calls else "its call"
        self.exposures.parted(
            now_us, request.number,
            f"{call} on replica {request.replica} for request {request.number}: asked "
            f"{request.estimate:,} held, {request.actual:,} spent; recorded "
            f"{request.charged:,} charged ({what})")

    def settlement_ran(self, number: int) -> bool:
        """Whether the store has run ``number``'s settlement in this scope: its
        own command released its hold or charged it, once its work was done."""
        request = self.requests.get(number)
        return request is not None and request.work_done and (
            request.settle_executed or request.hold == "released")

    def settled_elsewhere(self, number: int, now_us: int) -> None:
        """The store ran ``number``'s settlement in another of its scopes now:
        one script settles both (seed 000:25-27), so nothing of it was lost here."""
        request = self.requests.get(number)
        if request is None or request.settled_elsewhere:
            return
        request.settled_elsewhere_at = now_us
        # A leak already open (its replica died, the gateway gave up first)
        # keeps its cause: the late settlement that ran elsewhere does not
        # make that wait the store's.
        request.settled_elsewhere = True
        self._recount(self.book(request.key), request)

    def source_lost(self, source: Any, now_us: int) -> None:
        """A source of record vanished with its state (a crashed replica's memory)."""
        for key, book in self.books.items():
            if source in book.spent or source in book.holds:
                self.observe(key, source, now_us, -1, "replica_crash", spent=0, holds={})
                book.drop_source(source)

    def _charged(self, book: KeyBook, request: RequestTruth, delta: int, now_us: int,
                 source: Any = None) -> None:
        if request.unfenced:
            book.unfenced_spent[source] += delta
        request.charged += delta
        request.charges += 1
        request.settle_executed = True
        if request.charges > 1:
            self.counts["duplicate_settlements_executed"] += 1
            if request.duplicated:
                book.drift["duplicate_execution"] += delta
            else:
                book.drift[STORE_LOGIC] += delta
                self._store_drift(book, delta, request, now_us, "charged twice")
        self._recount(book, request)

    def _hold_created(self, book: KeyBook, rid: str, hold: tuple[int, int], now_us: int,
                      source: Any, tag: int, how: str) -> None:
        amount, deadline_ms = hold
        self.counts["holds_created"] += 1
        writer = tag if how == "command" else book.hold_owner.get((source, rid), -1)
        request = self.requests.get(writer)
        written_by = request
        if request is not None and (request.key != book.key
                                    or request.hold not in ("none", "lost", "evicted",
                                                            "crashed")):
            request = None  # a hold on another request's key, or a second one
        if request is None:
            # Orphaned from the start: brought back by a restore of older
            # data (the lab's data loss), or the store's own doing — a
            # driver's retry re-sends the same id, so it never adds a hold.
            cause = LOSS_HOW[how][1] if how in LOSS_HOW else STORE_LOGIC
            # The store's orphan is exposed by what the lab did to the request
            # whose command wrote it (a re-sent reserve, a lost settle reply).
            exposed = (written_by.exposure if cause == STORE_LOGIC and written_by is not None
                       and how == "command" else "")
            self._open_leak(book, rid, amount, now_us, deadline_us(deadline_ms), cause,
                            exposed)
            return
        book.hold_owner[(source, rid)] = request.number
        request.hold, request.hold_id, request.hold_amount = "held", rid, amount
        request.hold_deadline_us = deadline_us(deadline_ms)
        if how == "command":
            # A store reads its clock once its request has arrived, so an
            # honest deadline is never earlier than this one.
            # The TTL its own replica ran with (an operator may have changed it).
            ttl_ms = request.ttl_ms
            request.honest_deadline_ms = (
                deadline_ms if ttl_ms is None
                else self.clock_ms(request.replica, request.arrived_us) + ttl_ms)
            # No sound store reads its clock after its command ran: a hold
            # may count no later than that clock plus the configured TTL
            # (seed 000:12-15, 105), whatever deadline the store wrote.
            request.latest_deadline_us = (
                0 if ttl_ms is None
                else deadline_us(self.clock_ms(request.replica, now_us) + ttl_ms))
        if not request.admitted and request.over_at is None:
            self._decide(book, request, now_us, source)
        if request.over_at is not None:
            self._open_leak(book, rid, amount, now_us, deadline_us(deadline_ms),
                            request.leak_cause(), request.leak_exposure, request.latest_deadline_us)
        self._recount(book, request)

    def _hold_removed(self, book: KeyBook, rid: str, now_us: int, tag: int, how: str,
                      source: Any) -> None:
        self._close_leak(book, rid, now_us)
        request = self.requests.get(book.hold_owner.get((source, rid), -1))
        if request is None or request.hold_id != rid or request.hold != "held":
            return
        if how == "command" and tag == request.number:
            # Its own settlement released it. Whether the spend was charged is
            # the counter's business: a store that releases and charges in
            # two steps can do the first without the second.
            request.hold = "released"
        elif how in LOSS_HOW:
            request.hold = LOSS_HOW[how][0]
            self.counts[f"holds_lost_to_{how}"] += 1
        elif self._honestly_expired(request, now_us, tag, how):
            request.hold = "expired"
            if request.over_at is None and not request.settle_executed:
                self.counts["premature_expiries"] += 1
                self.counts["premature_expiry_microdollars"] += request.hold_amount
        elif how == "migration":
            # The migration drops the old layout's reservation hashes: it runs
            # with the fleet stopped (seed 000:548-550, 563), so a hold a live
            # request still had is the operator's doing, who left it serving.
            request.hold = MIGRATED_HOLD
            self.counts["holds_dropped_by_migration"] += 1
        else:
            request.hold = "removed"
            remover = self.requests.get(tag)
            if remover is not None and remover.fault_calls and not request.fault_calls:
                # Removed by a command of another request the lab faulted (a
                # compensation on its recovery path): that fault exposed it.
                request.fault_calls = remover.fault_calls[:1]
            elif (remover is not None and remover.replica != request.replica
                  and not request.fault_calls):
                # Overwritten or deleted by another replica's command on the
                # same key (reservation ids that collide across the fleet): no
                # fault, the lab's workload exposed it by sharing the key.
                call = "settle" if remover.work_done else "reserve"
                request.fault_calls = ((SHARED_KEY, call),)
                self.exposures.parted(
                    now_us, remover.number,
                    f"{call} on replica {remover.replica} for request {remover.number}: "
                    f"removed hold {rid}, request {request.number}'s on replica "
                    f"{request.replica}, live until its deadline")
            self.counts["holds_removed_by_store"] += 1
            self.counts["holds_removed_by_store_microdollars"] += request.hold_amount
        self._recount(book, request)

    def _honestly_expired(self, request: RequestTruth, now_us: int, tag: int,
                          how: str) -> bool:
        """Whether a hold that disappeared now had reached its honest deadline:
        by the clock of the replica whose command reclaimed it, or, for a key
        that expired (or a command of no request), by true time."""
        remover = self.requests.get(tag) if how == "command" else None
        if remover is not None:
            return self.clock_ms(remover.replica, now_us) >= request.honest_deadline_ms
        if request.ttl_ms is None:
            return now_us >= request.hold_deadline_us
        return now_us >= request.arrived_us + request.ttl_ms * 1_000

    # -- the bookkeeping ----------------------------------------------------

    def _decide(self, book: KeyBook, request: RequestTruth, now_us: int, source: Any) -> None:
        """The store admitted ``request`` now: was that what an ideal limiter
        would have done, and if not, whose fault was it?"""
        request.admitted = True
        estimate = request.estimate
        request.view_at_decision = book.truth_view
        cap = request.cap_used
        if cap is not None and book.truth_view + estimate > cap:
            excess = min(estimate, book.truth_view + estimate - cap)
            if request.unheld:
                request.wrongful = {self._unheld_cause(): excess}
                self._expose_wrongful(book, request, excess if not self.fail_open_allowed else 0,
                                      now_us)
            else:
                weights = {cause: amount for cause, amount in book.buckets.items() if amount > 0}
                if source is not None:
                    self._parked_unseen(book, source, request, weights)
                    for cause, amount in self._unseen_ledgers(book, source, now_us, weights,
                                                              request).items():
                        weights[cause] = weights.get(cause, 0) + amount
                # Past what its own record said (as its script judged it), the
                # store admitted by its own mistake; the rest of the excess
                # came through the gaps the lab opened between record and
                # truth, and with none open it is the store's too.
                own = 0
                if request.recorded_here:
                    own = max(0, min(excess, request.store_before + estimate - cap))
                request.wrongful = apportion(excess - own, weights)
                if own:
                    request.wrongful[STORE_LOGIC] = request.wrongful.get(STORE_LOGIC, 0) + own
                self._expose_wrongful(book, request, own, now_us)
        book.truth_view += estimate

    def _parked_unseen(self, book: KeyBook, source: Any, request: RequestTruth,
                       weights: dict[str, int]) -> None:
        """Spend a migration took off the old layout and has not put back yet
        (a claim in flight, or parked by an interruption: the store's until a
        re-run applies it) is hidden from a replica the operator left on that
        layout by the operator's doing: it reads no claim, and no v2 ledger
        either (a sound store refuses any new boot there, seed 000:70-75), so
        that much of its gap is ``stray_layout_writer``."""
        if (source not in self.emptied_sources or request.unfenced or self.per_replica
                or "stray_layout_writer" in self.absent_causes):
            return
        parked = min(book.migration_interrupted, weights.get(STORE_LOGIC, 0))
        if parked > 0:
            weights[STORE_LOGIC] -= parked
        parked += sum(amount for taken_book, amount in self.migration_taking
                      if taken_book is book)
        if parked > 0:
            weights["stray_layout_writer"] = weights.get("stray_layout_writer", 0) + parked

    def _unseen_ledgers(self, book: KeyBook, source: Any, now_us: int,
                        weights: Mapping[str, int],
                        request: RequestTruth | None = None) -> dict[str, int]:
        """The gap between the truth and the ledger the deciding command read
        that other ledgers hold: other replicas' (a per-replica store, seed
        001:164-166), or another layout's (a v1 replica the operator left
        writing beside a v2 fleet, 000:30-38). Only what those ledgers really
        hold is excused; the rest of the gap is someone else's. A replica no
        sound store lets boot (``unfenced``) reads the old layout by the
        store's fault, not the operator's: that gap is ``store_logic``."""
        now_ms = EPOCH_MS + now_us // 1_000
        unseen = book.truth_view - book.store_view(source, now_ms, self.holds_expire)
        elsewhere = sum(book.store_view(other, now_ms, self.holds_expire)
                        for other in book.spent.keys() | book.holds.keys() if other != source)
        cause = "per_replica_ledger" if self.per_replica else "stray_layout_writer"
        gap = max(0, min(unseen - sum(weights.values()), elsewhere))
        if request is not None and request.unfenced:
            return {STORE_LOGIC: gap}
        if cause in self.absent_causes:
            return {}
        # What replicas no sound store lets boot wrote where this one cannot
        # read is the store's: only a stray the operator left is the operator's.
        unfenced = min(gap, sum(spent for other, spent in book.unfenced_spent.items()
                                if other != source))
        return {cause: gap - unfenced, STORE_LOGIC: unfenced}

    def _expose_wrongful(self, book: KeyBook, request: RequestTruth, own: int,
                         now_us: int) -> None:
        """Name what exposed the store-logic part of a wrongful admission: its
        own faults for what its record counted wrong, and what exposed the
        store-logic gap between record and truth for the rest."""
        store = request.wrongful.get(STORE_LOGIC, 0)
        if not store:
            return
        gap = dominant(book.bucket_exposure, NO_FAULT)
        if request.unfenced:
            gap = request.unfenced  # it read a layout a sound store would not serve
        elif gap == NO_FAULT and book.unfenced_spent and self.unfenced_exposure:
            gap = self.unfenced_exposure  # it could not read what such a replica wrote
        elif gap == NO_FAULT and book.migration_net:
            gap = self.migration_exposure  # a migration moved spend in this book
        request.wrongful_own, request.wrongful_gap = own, (gap, store - own)
        self._parted(now_us, request, f"admitted {store:,} past the cap")

    def _recount(self, book: KeyBook, request: RequestTruth) -> None:
        """Move ``request``'s shortfall to the bucket of its current cause."""
        if request.slack and (request.settle_executed or request.over_at is not None):
            book.settling_slack -= request.slack
            request.slack = 0
        truth = request.truth
        cause: str | None = None
        shortfall = 0
        if request.carry == "carried":
            pass  # a migration carried it into this scope's record
        elif request.admitted and not request.settle_executed:
            cause, shortfall = self._shortfall_cause(request), truth
            if request.unheld:
                shortfall -= request.hold_amount if request.hold == "held" else 0
            elif request.hold == "held":
                shortfall -= request.hold_amount
        self._recount_unsettled(book, request)
        if request.cause is not None:
            book.buckets[request.cause] -= request.shortfall
            if request.cause == STORE_LOGIC:
                book.bucket_exposure[request.shortfall_exposure] -= request.shortfall
        if cause is not None:
            book.buckets[cause] += shortfall
            if cause == STORE_LOGIC:
                request.shortfall_exposure = (self.migration_exposure if request.carry == "lost"
                                              else request.exposure)
                book.bucket_exposure[request.shortfall_exposure] += shortfall
                if shortfall > 0 and request.over_at is not None and not request.noted:
                    request.noted = True
                    self.partings.append((self._when_parted(request), request,
                                          self._parting_words(request)))
        request.cause, request.shortfall = cause, shortfall

    def _unheld_cause(self) -> str:
        """An admission with nothing held: the fail-open policy's when the
        scenario configured it (seed 001:478-520), else the store's."""
        return "fail_open_admission" if self.fail_open_allowed else STORE_LOGIC

    def _shortfall_cause(self, request: RequestTruth) -> str:
        """Why the store counts less than the truth for an admitted request
        whose settlement has not charged it."""
        if request.unheld:
            return self._unheld_cause()
        if not request.recorded_here:
            # No command of it ever touched this scope's record: the store's
            # layout does not keep this scope (a subject-capped store judged
            # against a namespace cap it does not enforce yet), and no
            # migration has carried it in (one that should have: the store's).
            # A replica no sound store lets boot writes no namespace record
            # by the store's fault: what no migration carries is the store's.
            lost = request.carry == "lost" or (request.unfenced and request.carry != "carried")
            return STORE_LOGIC if lost else "scope_not_enforced"
        if request.hold == "held":
            return ("estimate_underrun" if request.hold_amount >= request.estimate
                    else STORE_LOGIC)
        if request.hold == "released":
            # Its own settlement ran (the store released the hold) and did not
            # charge it: release and charge are one step (seed 000:110-111,
            # 001:129-131), so whatever became of the reply, the store's.
            return STORE_LOGIC
        if request.over_at is not None:
            # It finished, and its settlement never charged it: lost before
            # the store ran it (the contract allows that request's spend).
            return ("settlement_lost" if request.lost_by_lab and not request.settled_elsewhere
                    else STORE_LOGIC)
        if request.hold == "expired":
            return "hold_expired_while_running"
        if request.hold in ("lost", "evicted", "crashed"):
            return {"lost": "server_data_loss", "evicted": "eviction",
                    "crashed": "crashed_replica_ledger"}[request.hold]
        if request.misaligned:
            return "misaligned_reply"  # admitted on another call's answer
        if request.hold == MIGRATED_HOLD:
            # Unless no sound store would have let its replica serve then.
            return STORE_LOGIC if request.unfenced else "stray_layout_writer"
        return STORE_LOGIC  # removed by the store, or admitted with no hold written

    def _recount_unsettled(self, book: KeyBook, request: RequestTruth) -> None:
        """Spend done but never recorded: its settlement is on its way, or it
        will never land (the gateway gave up on it, or died holding it)."""
        cause, amount = None, 0
        if request.admitted and request.work_done and not request.settle_executed:
            if request.over_at is None:
                cause = "settlement_in_flight"
            elif request.unheld:
                cause = self._unheld_cause()  # nothing held, so nothing to settle
            elif not request.recorded_here:
                cause = STORE_LOGIC if request.unfenced else "scope_not_enforced"
            elif request.hold == "released" or request.settled_elsewhere:
                cause = STORE_LOGIC  # its settlement ran (here or in another scope), uncharged
            else:
                cause = "settlement_lost" if request.lost_by_lab else STORE_LOGIC
            amount = request.actual
        if request.unsettled_cause is not None:
            book.drift[request.unsettled_cause] += request.unsettled
            if request.unsettled_cause == STORE_LOGIC:
                book.drift_exposure[request.unsettled_exposure] += request.unsettled
        if cause is not None:
            book.drift[cause] -= amount
            if cause == STORE_LOGIC:
                request.unsettled_exposure = request.exposure
                book.drift_exposure[request.unsettled_exposure] -= amount
                if amount and not request.noted:
                    request.noted = True
                    self.partings.append((self._when_parted(request), request,
                                          self._parting_words(request)))
        request.unsettled_cause, request.unsettled = cause, amount

    def _when_parted(self, request: RequestTruth) -> int:
        """When ``request``'s record parted from the truth for good: when a
        migration failed to carry it, else when it was over."""
        if request.carry == "lost" and self.last_migration_us is not None:
            return self.last_migration_us
        return request.over_at if request.over_at is not None else request.arrived_us

    def _parting_words(self, request: RequestTruth) -> str:
        if request.carry == "lost":
            return "the migration did not carry its spend"
        if request.hold == "released":
            return "its hold released, its spend not charged"
        return "its spend not recorded"

    def _maybe_leak(self, book: KeyBook, request: RequestTruth, now_us: int) -> None:
        if request.hold == "held":
            self._open_leak(book, request.hold_id, request.hold_amount, now_us,
                            request.hold_deadline_us, request.leak_cause(), request.leak_exposure,
                            request.latest_deadline_us)

    def _open_leak(self, book: KeyBook, rid: str, amount: int, now_us: int,
                   end_us: int, cause: str, exposed: str = "", bound_us: int = 0) -> None:
        # A sound store stops counting a stranded hold at the deadline it wrote
        # (seed 000:12-15, 77-79), and writes none past its clock plus the
        # configured TTL (``bound_us``, when known): the contract's bound.
        due_us = min(end_us, bound_us) if bound_us else end_us
        if not self.holds_expire:
            end_us = NEVER  # counted until something removes it
        if end_us > now_us and rid not in book.open_leaks:
            book.open_leaks[rid] = (now_us, amount, end_us, cause, due_us,
                                    exposed or (NO_FAULT if cause == STORE_LOGIC else cause))
            self.counts["holds_leaked"] += 1

    def _close_leak(self, book: KeyBook, rid: str, now_us: int) -> None:
        leak = book.open_leaks.pop(rid, None)
        if leak is not None:
            self._record_leak(book, leak, max(leak[0], now_us))

    def _record_leak(self, book: KeyBook, leak: tuple, until_us: int) -> None:
        """A leak that ended at ``until_us``: within its deadline it is its
        cause's, past it the store's, exposed by what stranded it."""
        start, amount, end, cause, due, exposed = leak
        end = min(end, until_us)
        if cause == STORE_LOGIC or end <= due:
            book.leaks.append(Leak(book.key, start, end, amount, cause,
                                   exposed if cause == STORE_LOGIC else ""))
            return
        if due > start:
            book.leaks.append(Leak(book.key, start, due, amount, cause))
        book.leaks.append(Leak(book.key, max(start, due), end, amount, STORE_LOGIC, exposed))

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
            for cause, amount in book.drift_by_cause(self.carried_into).items():
                row[f"drift_{cause}_microdollars"] = amount
            total.update(row)
            cap = self.cap_in_force(book)
            if cap:
                over = max(0, book.true_spend - cap) / cap
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
        self._settle_migration(final=True)
        self._note_partings()
        for book in self.books.values():
            for rid, leak in list(book.open_leaks.items()):
                amount, end = leak[1], leak[2]
                self._record_leak(book, leak, end_us)
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
        for request in self.store_wrongful_admissions:
            self.exposures.add("wrongful_admissions", 1,
                               dominant(request.wrongful_exposure(), NO_FAULT))
        self.store_wrongful_admissions = []
        metrics.update(self.exposures.summary(STORE_LOGIC_PARTS, {
            metric: metrics.get(part.format(cause=STORE_LOGIC))
            for metric, part in STORE_LOGIC_PARTS.items()}))
        return {name: value for name, value in metrics.items()
                if not any(cause in name for cause in self.absent_causes)}

    def _settle_carry_due(self) -> None:
        """What the operator's last migration should have carried into each
        book: the spend of requests this scope's record never kept
        (``scope_not_enforced``) that was over before it ran and on the old
        ledger before it took that ledger's spend."""
        if self.last_migration_us is None:
            return
        for book in self.books.values():
            book.carry_due = 0
        for request in self.requests.values():
            if (request.unsettled_cause == "scope_not_enforced" and request.over_at is not None
                    and request.over_at <= self.last_migration_us
                    and not self._spent_after_taken(request)):
                self.books[request.key].carry_due += request.unsettled

    def _spend_metrics(self, end_us: int) -> dict[str, Any]:
        self._settle_carry_due()
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
            **self._drift_by_cause(),
            **self._one_sided_by_cause(),
            "holds_outstanding_microdollars_at_end": sum(
                book.store_view(source, end_ms, self.holds_expire) - book.spent.get(source, 0)
                for book in self.books.values() for source in book.holds),
        }

    def _drift_by_cause(self) -> dict[str, int]:
        totals: Counter = Counter({cause: 0 for cause in DRIFT_CAUSES})
        for book in self.books.values():
            parts = book.drift_by_cause(self.carried_into)
            totals.update(parts)
            self._expose_drift(book, "conservation_drift_microdollars_total",
                               parts[STORE_LOGIC])
        return {f"conservation_drift_by_{cause}_microdollars": totals[cause]
                for cause in DRIFT_CAUSES}

    def _one_sided_by_cause(self) -> dict[str, int]:
        """The undercount and the overcount split by cause: each book's drift,
        on its side, over the parts of its drift on that side."""
        under: Counter = Counter({cause: 0 for cause in DRIFT_CAUSES})
        over: Counter = Counter({cause: 0 for cause in DRIFT_CAUSES})
        for book in self.books.values():
            drift = sum(book.spent.values()) - book.true_spend
            if not drift:
                continue
            parts = book.drift_by_cause(self.carried_into)
            sign = 1 if drift > 0 else -1
            side = apportion(abs(drift), {cause: sign * part for cause, part in parts.items()})
            allowed = OVERCOUNT_CAUSES if drift > 0 else UNDERCOUNT_CAUSES
            for cause in [cause for cause in side if cause not in allowed]:
                # A lab cause on the side it cannot move: what it cannot explain.
                side[STORE_LOGIC] = side.get(STORE_LOGIC, 0) + side.pop(cause)
            (over if drift > 0 else under).update(side)
            metric = ("conservation_overcount_microdollars_total" if drift > 0
                      else "conservation_undercount_microdollars_total")
            self._expose_drift(book, metric, side.get(STORE_LOGIC, 0))
        return {**{f"conservation_undercount_by_{cause}_microdollars": under[cause]
                   for cause in UNDERCOUNT_CAUSES},
                **{f"conservation_overcount_by_{cause}_microdollars": over[cause]
                   for cause in OVERCOUNT_CAUSES}}

    def _expose_drift(self, book: KeyBook, metric: str, store: int) -> None:
        """File ``store`` of ``metric`` (a book's store-logic drift) by what
        exposed it: the faults its parts were filed with, then the
        migration's, else none."""
        if not store:
            return
        weights = {exposed: abs(amount) for exposed, amount in book.drift_exposure.items()
                   if amount}
        if not weights:
            weights = {self.migration_exposure: 1}
        for exposed, amount in apportion(abs(store), weights, NO_FAULT).items():
            self.exposures.add(metric, amount, exposed)

    def _overshoot_metrics(self) -> dict[str, Any]:
        by_cause: Counter = Counter()
        worst_ratio: float | None = None
        total = over = 0
        config_change = self._config_change()
        for key, book in self.books.items():
            cap = self.cap_in_force(book)
            if cap is None:
                continue
            excess = max(0, book.true_spend - cap)
            ratio = excess / cap if cap else float(excess > 0)
            worst_ratio = max(worst_ratio or 0.0, ratio)
            if excess:
                over += 1
                total += excess
                weights = dict(book.wrongful)
                weights["estimate_underrun"] = weights.get("estimate_underrun", 0) + book.underrun
                weights[CONFIG_CHANGE] = config_change.get(key, 0)
                parts = apportion(excess, weights)
                by_cause.update(parts)
                if parts.get(STORE_LOGIC):
                    for exposed, amount in apportion(parts[STORE_LOGIC], book.wrongful_exposure(),
                                                     NO_FAULT).items():
                        self.exposures.add("cap_overshoot_microdollars_total", amount, exposed)
        capped = any(book.cap is not None for book in self.books.values())
        metrics: dict[str, Any] = {
            "cap_overshoot_max_ratio": round(worst_ratio, 9) if capped else None,
            "cap_overshoot_microdollars_total": total if capped else None,
            "keys_over_cap": over if capped else None,
        }
        for cause in OVERSHOOT_CAUSES:
            metrics[f"cap_overshoot_by_{cause}_microdollars"] = by_cause.get(cause, 0)
        metrics["wrongful_admissions"] = self.counts.get("wrongful_admissions", 0)
        for cause in CAUSES:
            metrics[f"wrongful_admissions_by_{cause}"] = self.counts.get(
                f"wrongful_admissions_by_{cause}", 0)
        return metrics

    def cap_in_force(self, book: KeyBook) -> int | None:
        """``book``'s cap as the fleet runs it now: the scenario's, or, once
        an operator changed it, the lowest any replica runs with (an overshoot
        is judged against the strictest; ``_config_change`` says how much of
        it the change let in)."""
        if not self.caps_changed:
            return book.cap
        caps = [self.replica_caps.get(index, book.cap)
                for index in range(len(self.clocks)) or self.replica_caps]
        caps = [cap for cap in caps if cap is not None]
        return min(caps) if caps else book.cap

    def _config_change(self) -> dict[Key, int]:
        """By key, what admissions let through past the cap in force now
        beyond their excess over the cap their own replica ran with: what an
        operator's change let in (a cap lowered below what was already
        admitted, an old replica still admitting under the old cap), not the
        store. Zero without a change: the two caps are one."""
        if not self.caps_changed:
            return {}
        found: Counter = Counter()
        for request in self.requests.values():
            if not (request.confirmed and request.admitted) or request.aborted:
                continue
            cap = self.cap_in_force(self.books[request.key])
            if cap is None:
                continue
            past = max(0, min(request.estimate, request.view_at_decision + request.estimate
                              - cap))
            found[request.key] += max(0, past - sum(request.wrongful.values()))
        return found

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
        seconds_by_cause: Counter = Counter({cause: 0.0 for cause in LEAK_CAUSES})
        for leak in leaks:
            seconds_by_cause[leak.cause] += leak.microdollar_seconds
            if leak.cause == STORE_LOGIC:
                self.exposures.add("leaked_hold_microdollar_seconds", leak.microdollar_seconds,
                                   leak.exposure or NO_FAULT)
        return {
            "holds_leaked": self.counts.get("holds_leaked", 0),
            "leaked_hold_microdollar_seconds": round(
                sum(leak.microdollar_seconds for leak in leaks), 3),
            **{f"leaked_hold_microdollar_seconds_by_{cause}": round(seconds, 3)
               for cause, seconds in seconds_by_cause.items()},
            "leaked_hold_peak_share_of_cap": round(peak_share, 9),
            "holds_still_leaked_at_end": self.counts.get("holds_still_leaked_at_end", 0),
            "premature_expiries": self.counts.get("premature_expiries", 0),
            "premature_expiry_microdollars": self.counts.get("premature_expiry_microdollars", 0),
            "holds_lost_to_data_loss": self.counts.get("holds_lost_to_data_loss", 0),
            "holds_lost_to_eviction": self.counts.get("holds_lost_to_evicted", 0),
            "holds_lost_to_replica_crash": self.counts.get("holds_lost_to_replica_crash", 0),
            "holds_removed_by_store": self.counts.get("holds_removed_by_store", 0),
            "holds_removed_by_store_microdollars":
                self.counts.get("holds_removed_by_store_microdollars", 0),
            "spend_lost_to_data_loss_microdollars":
                self.counts.get("spend_lost_to_server_data_loss_microdollars", 0),
            "spend_lost_to_eviction_microdollars":
                self.counts.get("spend_lost_to_eviction_microdollars", 0),
            "spend_lost_to_crashed_replica_ledger_microdollars":
                self.counts.get("spend_lost_to_crashed_replica_ledger_microdollars", 0),
            "duplicate_settlements_executed":
                self.counts.get("duplicate_settlements_executed", 0),
            "convergence_after_faults_us": convergence_us,
        }
