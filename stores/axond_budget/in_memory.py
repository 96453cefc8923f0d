"""A spend budget kept in this replica's memory (a port of axond 0.3.8).

No datastore is involved, so the cap is a *per-replica* ceiling: a fleet of N
replicas, each enforcing ``subject_cap_microdollars`` on its own, can together
admit up to N times the cap for one subject. That is the documented trade of
this backend, not a bug to be hidden; use a shared store for one fleet-wide cap.
On a single replica, holds make the cap exact: requests in flight count
against it, so concurrent requests here cannot jointly overshoot.

Rules kept here:

* One ledger per ``BudgetKey``: settled spend, the holds still outstanding
  (each with its own deadline) and when the ledger was last touched.
* A hold whose deadline is at or before now is gone (it stays only while its
  deadline is strictly in the future). Expired holds are dropped whenever a
  ledger is touched or pruning inspects it; there is no sweeper.
* The number of retained ledgers is bounded by ``max_subjects``. A new key at
  the bound first evicts ledgers that are idle (untouched for more than
  ``idle_ttl``) and hold nothing. When nothing can be evicted the request is
  refused through ``on_unavailable``: deny as *store unavailable* (the
  default) or admit unenforced with an unheld reservation.
* With several namespaces configured, each one is guaranteed a floor of
  ``max_subjects // namespace_count`` ledgers, so one busy namespace cannot
  crowd the others out; a namespace may still burst into headroom no other
  namespace has a claim on. Pruning then only evicts the requesting
  namespace's own ledgers. Without a usable floor (no namespaces configured,
  or fewer subjects than namespaces) capacity is one global pool.
* ``settle`` of an unheld reservation does nothing. Otherwise it drops the
  hold and records the spend in one step, recreating the ledger when it was
  evicted meanwhile, so a late settlement is still charged. ``release`` is
  ``settle`` of zero.
* Time and ids come only from the ``Runtime`` port. No call awaits anything,
  so on one event loop each call is atomic with respect to the others.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from stores.axond_budget.contract import (
    Admission,
    BudgetKey,
    RecordedLedger,
    Reservation,
    UnavailablePolicy,
    require_amount,
)
from stores.domains import Amount, Integer
from stores.ports import Runtime
from stores.quantities import DurationMs

BACKEND = "in_memory"

logger = logging.getLogger(__name__)


MAX_LEDGERS = 10_000_000
"""The largest ``max_subjects`` (and ``namespace_count``) a replica is configured with."""


class InMemorySettings(BaseModel):
    """Settings of the per-replica in-memory budget store."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    reloadable: ClassVar[tuple[str, ...]] = ("subject_cap_microdollars", "reservation_ttl")
    """What an operator may change while the fleet runs (``reconfigure``)."""

    subject_cap_microdollars: Amount = Field(
        1_000_000, description="Spend cap of one (namespace, subject), in micro-dollars."
    )
    # An idle TTL of zero stays allowed: an empty ledger is then evictable as
    # soon as it is idle, and only when room is needed; memory traded against
    # forgotten spend, a choice rather than a broken store (the bounded-ledger
    # tests run it that way).
    idle_ttl_ms: DurationMs = Field(
        "1h",
        alias="idle_ttl",
        description="How long a ledger holding nothing may sit untouched before it "
        "can be evicted to make room, e.g. '1h'.",
    )
    # gt=0: a hold that expires as it is made reserves nothing.
    reservation_ttl_ms: DurationMs = Field(
        "5m",
        gt=0,
        alias="reservation_ttl",
        description="How long a hold outlives a request that never settles, e.g. '5m'.",
    )
    max_subjects: Integer = Field(
        10_000, ge=1, le=MAX_LEDGERS, description="Most ledgers this replica retains at once."
    )
    namespace_count: Integer = Field(
        1,
        ge=0,
        le=MAX_LEDGERS,
        description="How many namespaces are configured; each gets an equal share of "
        "max_subjects as a guaranteed floor (0 turns floors off).",
    )
    on_unavailable: UnavailablePolicy = Field(
        UnavailablePolicy.DENY,
        description="'deny' (fail-closed) or 'allow' (fail-open) when no ledger can be made.",
    )


@dataclass(slots=True)
class _Hold:
    amount_microdollars: int
    deadline_ms: int


@dataclass(slots=True)
class _Ledger:
    last_touched_ms: int
    spent_microdollars: int = 0
    holds: dict[str, _Hold] = field(default_factory=dict)

    def outstanding(self) -> int:
        return sum(hold.amount_microdollars for hold in self.holds.values())

    def drop_expired(self, now_ms: int) -> None:
        # A hold is live only while its deadline lies strictly ahead.
        self.holds = {rid: h for rid, h in self.holds.items() if h.deadline_ms > now_ms}

    def evictable(self, now_ms: int, idle_ttl_ms: int) -> bool:
        # A clock that stepped backwards counts as "no time passed".
        idle_for = max(0, now_ms - self.last_touched_ms)
        return not self.holds and idle_for > idle_ttl_ms


def _floor_per_namespace(max_subjects: int, namespace_count: int) -> int:
    """Ledgers guaranteed to each namespace; 0 means one global pool."""
    if namespace_count == 0:
        return 0
    if max_subjects < namespace_count:
        # Not even one ledger per namespace: a floor cannot be honoured, so
        # fall back to the global pool rather than refuse to start.
        logger.warning(
            "in-memory budget: max_subjects=%d is smaller than namespace_count=%d, "
            "so per-namespace floors are off and capacity is one shared pool",
            max_subjects,
            namespace_count,
        )
        return 0
    return max(1, max_subjects // namespace_count)


class InMemoryBudget:
    """``BudgetStore`` over ledgers held in this replica's memory."""

    name = BACKEND

    def __init__(self, runtime: Runtime, settings: InMemorySettings) -> None:
        self._runtime = runtime
        self._settings = settings
        self._floor = _floor_per_namespace(settings.max_subjects, settings.namespace_count)
        self._ledgers: dict[BudgetKey, _Ledger] = {}
        # Kept in step with ``_ledgers`` so capacity checks need no scan.
        self._per_namespace: dict[str, int] = {}

    @property
    def settings(self) -> InMemorySettings:
        return self._settings

    @property
    def floor(self) -> int:
        """Ledgers guaranteed to each namespace (0: floors are off)."""
        return self._floor

    # -- the request path ----------------------------------------------------

    async def reserve(self, key: BudgetKey, estimated_microdollars: int) -> Admission:
        require_amount("the estimate", estimated_microdollars)
        settings = self._settings
        if key not in self._ledgers and not self._room_for_new_ledger(key.namespace):
            # Only at the bound is pruning worth its scan.
            self._prune(key.namespace)
            if not self._room_for_new_ledger(key.namespace):
                return self._refuse_for_capacity(key.namespace)

        now = self._runtime.now_ms()
        ledger = self._ledger_for(key, now)
        ledger.drop_expired(now)
        # Touched even when the request is then refused: an active subject
        # keeps its spend rather than being evicted and forgiven.
        ledger.last_touched_ms = now
        committed = ledger.spent_microdollars + ledger.outstanding()
        if committed + estimated_microdollars > settings.subject_cap_microdollars:
            return Admission.exceeded()
        reservation = Reservation(
            id=self._runtime.new_id(), estimate_microdollars=estimated_microdollars
        )
        ledger.holds[reservation.id] = _Hold(
            amount_microdollars=estimated_microdollars,
            deadline_ms=now + settings.reservation_ttl_ms,
        )
        return Admission.allowed(reservation)

    async def settle(
        self, key: BudgetKey, reservation: Reservation, actual_microdollars: int
    ) -> None:
        require_amount("the actual spend", actual_microdollars)
        if not reservation.is_held:
            # Fail-open admissions held nothing, so there is nothing to charge.
            return
        now = self._runtime.now_ms()
        # No capacity check here: the spend happened, and dropping it because
        # the ledger was evicted meanwhile would forgive it.
        ledger = self._ledger_for(key, now)
        ledger.drop_expired(now)
        ledger.holds.pop(reservation.id, None)
        ledger.last_touched_ms = now
        ledger.spent_microdollars += actual_microdollars

    async def release(self, key: BudgetKey, reservation: Reservation) -> None:
        await self.settle(key, reservation, 0)

    # -- capacity ------------------------------------------------------------

    def _room_for_new_ledger(self, namespace: str) -> bool:
        free = max(0, self._settings.max_subjects - len(self._ledgers))
        return free > self._reserved_for_others(namespace)

    def _reserved_for_others(self, namespace: str) -> int:
        """Free slots a new ledger of ``namespace`` must leave untouched.

        Each other namespace below its floor may claim the rest of it, and each
        configured namespace not seen yet may claim a whole floor. The claim is
        capped by what is left once the requester's own shortfall is granted,
        so namespaces appearing beyond ``namespace_count`` (e.g. after a
        reload shrank it) cannot lock out capacity nobody else can use.
        """
        floor = self._floor
        others_short = sum(
            max(0, floor - retained)
            for present, retained in self._per_namespace.items()
            if present != namespace
        )
        requester_present = namespace in self._per_namespace
        unseen_others = max(0, self._settings.namespace_count - len(self._per_namespace))
        if not requester_present:
            unseen_others = max(0, unseen_others - 1)
        claim = others_short + unseen_others * floor
        free = max(0, self._settings.max_subjects - len(self._ledgers))
        requester_short = max(0, floor - self._per_namespace.get(namespace, 0))
        return min(claim, max(0, free - requester_short))

    def _prune(self, namespace: str) -> None:
        # With floors, evicting another namespace's ledgers would eat into the
        # share it is guaranteed, so only the requester pays for its own room.
        now = self._runtime.now_ms()
        idle_ttl_ms = self._settings.idle_ttl_ms
        doomed = []
        for key, ledger in self._ledgers.items():
            if self._floor and key.namespace != namespace:
                continue
            ledger.drop_expired(now)
            if ledger.evictable(now, idle_ttl_ms):
                doomed.append(key)
        for key in doomed:
            self._forget(key)
        logger.debug("in-memory budget retains %d ledgers after pruning", len(self._ledgers))

    def _refuse_for_capacity(self, namespace: str) -> Admission:
        free = max(0, self._settings.max_subjects - len(self._ledgers))
        if self._floor == 0 or free == 0:
            reason = "every ledger slot is taken"
        else:
            reason = "the free ledger slots belong to other namespaces' floors"
        logger.warning(
            "in-memory budget refused a new ledger for namespace %r: %s "
            "(namespace retains %d, floor %d, retained %d of max_subjects %d)",
            namespace,
            reason,
            self._per_namespace.get(namespace, 0),
            self._floor,
            len(self._ledgers),
            self._settings.max_subjects,
        )
        policy = self._settings.on_unavailable
        if policy is UnavailablePolicy.ALLOW:
            logger.warning("%s budget cannot enforce the cap; admitting (fail-open)", BACKEND)
        else:
            logger.error("%s budget cannot enforce the cap; denying (fail-closed)", BACKEND)
        return policy.admission()

    # -- ledger bookkeeping --------------------------------------------------

    def _ledger_for(self, key: BudgetKey, now_ms: int) -> _Ledger:
        ledger = self._ledgers.get(key)
        if ledger is None:
            ledger = self._ledgers[key] = _Ledger(last_touched_ms=now_ms)
            self._per_namespace[key.namespace] = self._per_namespace.get(key.namespace, 0) + 1
        return ledger

    def _forget(self, key: BudgetKey) -> None:
        if self._ledgers.pop(key, None) is None:
            return
        remaining = self._per_namespace.get(key.namespace, 0) - 1
        if remaining > 0:
            self._per_namespace[key.namespace] = remaining
        else:
            self._per_namespace.pop(key.namespace, None)

    def restore_ledger(self, key: BudgetKey, spent_microdollars: int = 0) -> None:
        """Retain a ledger for ``key`` as state that predates this call.

        Skips the capacity check on purpose: it stands for ledgers left over
        from before a configuration reload (say one that lowered
        ``namespace_count``), which can exceed what the current settings would
        admit. Never called on the request path; tests and the lab use it to
        set up such states. The ledger counts as touched now.
        """
        ledger = self._ledger_for(key, self._runtime.now_ms())
        ledger.spent_microdollars += spent_microdollars

    # -- read-only inspection (for tests and the lab's oracle) ---------------

    def ledger_keys(self) -> list[BudgetKey]:
        """The keys whose ledgers are retained, oldest first."""
        return list(self._ledgers)

    def spent(self, key: BudgetKey) -> int:
        """Settled spend of ``key``; 0 when no ledger is retained."""
        ledger = self._ledgers.get(key)
        return ledger.spent_microdollars if ledger else 0

    def outstanding(self, key: BudgetKey) -> int:
        """Sum of the holds ``key`` still carries, expired ones included
        (inspection must not change state, so nothing is reclaimed)."""
        ledger = self._ledgers.get(key)
        return ledger.outstanding() if ledger else 0

    def ledger(self, key: BudgetKey) -> RecordedLedger:
        """Settled spend and every hold of ``key``, expired ones included."""
        ledger = self._ledgers.get(key)
        if ledger is None:
            return RecordedLedger(0, {})
        return RecordedLedger(
            ledger.spent_microdollars,
            {rid: (h.amount_microdollars, h.deadline_ms) for rid, h in ledger.holds.items()},
        )

    def namespace_counts(self) -> dict[str, int]:
        """Retained ledgers per namespace (a copy)."""
        return dict(self._per_namespace)
