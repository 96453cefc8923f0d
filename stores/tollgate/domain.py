"""tollgate's ledger values (seed 003): units, grants, the funding equation, batches.

How the seed's unit domain is read here:

* ``CostUnits`` is tollgate_core's ``u64``: a Python ``int`` in
  ``0..=COST_UNITS_MAX``. Value types (``Conservation``, reports, the grant
  policy) accept that whole domain, so the seed's ``u64::MAX`` cases port as
  they are.
* What a *ledger* stores is narrower: PostgreSQL keeps units as nonnegative
  ``BIGINT`` (``0..=LEDGER_UNITS_MAX``, i.e. ``i64::MAX``), and the issue asks
  the in-memory ledger to give the same results, so both ledgers keep every
  stored amount and accumulated total inside ``BIGINT``. (The seed's
  MemoryStore took all of ``u64``; that is the one divergence, chosen so the
  two backends of the lab agree.)
* Instants and durations are ``int`` milliseconds (the lab's clock unit),
  passed in by the caller as ``now`` -- a ledger never reads a clock. Instants
  are ``BIGINT`` too (``TIMESTAMP_MIN..=TIMESTAMP_MAX``).

Every sum that could leave its domain is checked and reported, never wrapped.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from stores.tollgate.errors import BalanceShortfall, StoreError

COST_UNITS_MAX = 2**64 - 1
"""tollgate_core's ``CostUnits`` is a ``u64``."""

LEDGER_UNITS_MAX = 2**63 - 1
"""The largest amount or total a ledger stores: PostgreSQL's ``BIGINT``."""

TIMESTAMP_MIN = -(2**63)
TIMESTAMP_MAX = 2**63 - 1
"""Instants in ms, stored as ``BIGINT`` like everything else."""

DEFAULT_RECLAIM_BATCH_LIMIT = 256
"""Leases settled by one expiry-reclaim transaction: bounds locks and rows per
transaction, not the backlog (the drain runs saturated batches until a partial one)."""

DEFAULT_ROLLOVER_BATCH_LIMIT = 256
"""Accounts crossed by one rollover transaction. Every scheduled account comes
due at the same instant, so this is the normal shape of the first pass after a
boundary, drained like the reclaim."""

MAX_INGEST_BATCH = 4_096
"""The largest usage batch any sink accepts in one call, in events."""


def require_units(name: str, value: int, maximum: int = COST_UNITS_MAX) -> int:
    """``value`` as a unit amount in ``0..=maximum``, or ``ValueError`` naming it.

    A programming error, not a refusal: a negative amount would turn a debit
    into a credit, so it never reaches a ledger."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ValueError(f"{name} must be a whole number in 0..={maximum}, got {value!r}")
    return value


def require_ledger_id(name: str, value: int) -> int:
    """``value`` as an id a ledger can store (a ``BIGINT``), or ``ValueError``
    naming it: an id no row can hold is a caller's bug, refused before any write."""
    if isinstance(value, bool) or not isinstance(value, int) or not (
            TIMESTAMP_MIN <= value <= TIMESTAMP_MAX):
        raise ValueError(f"{name} must be a whole number in {TIMESTAMP_MIN}..={TIMESTAMP_MAX}, "
                         f"got {value!r}")
    return value


def checked_sum(parts: Sequence[int], maximum: int = COST_UNITS_MAX) -> int | None:
    """The sum of ``parts``, or ``None`` when any prefix leaves ``0..=maximum``:
    an unrepresentable total is reported, never wrapped or saturated."""
    total = 0
    for part in parts:
        total += part
        if not 0 <= part <= maximum or total > maximum:
            return None
    return total


class AccountStatus(enum.Enum):
    """An account's administrative status; only ``ACTIVE`` may lease.
    ``CLOSED`` is terminal from creation onwards."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    CLOSED = "closed"


class CapacityClass(enum.Enum):
    """Whether an instance starts an already-funded request at once or as
    capacity allows. An account-owned fact with one writer; funding ignores it."""

    ASSURED = "assured"
    BEST_EFFORT = "best_effort"


@dataclass(frozen=True, slots=True)
class BudgetSchedule:
    """A periodic allowance: ``allowance`` units for each period of
    ``period_ms``, periods starting at ``anchor_ms + k * period_ms``."""

    allowance: int
    period_ms: int
    anchor_ms: int = 0

    def __post_init__(self) -> None:
        require_units("allowance", self.allowance, LEDGER_UNITS_MAX)
        if not 0 < self.period_ms <= TIMESTAMP_MAX:
            raise ValueError(f"period_ms must be a positive duration in ms up to {TIMESTAMP_MAX}, "
                             f"got {self.period_ms!r}")
        if not TIMESTAMP_MIN <= self.anchor_ms <= TIMESTAMP_MAX:
            raise ValueError(f"anchor_ms must be an instant a ledger stores, "
                             f"got {self.anchor_ms!r}")

    def period_start(self, now: int) -> int:
        """First instant of the period containing ``now``."""
        return now - (now - self.anchor_ms) % self.period_ms


@dataclass(frozen=True, slots=True)
class AccountConfig:
    """Admin inputs when creating an account. ``status`` and
    ``capacity_class`` are given at birth so creation and the setters speak one
    vocabulary about one column, with no window without a value."""

    account_id: int
    initial_balance: int
    status: AccountStatus = AccountStatus.ACTIVE
    capacity_class: CapacityClass = CapacityClass.ASSURED


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """A lease: a capability to spend ``granted`` units until ``expires_at``,
    named by ``(lease_id, fencing_token)``."""

    lease_id: int
    account_id: int
    fencing_token: int
    granted: int
    expires_at: int


class LeaseState(enum.Enum):
    """A lease is active until released or reclaimed; both are terminal."""

    ACTIVE = "active"
    RELEASED = "released"
    RECLAIMED = "reclaimed"


@dataclass(frozen=True, slots=True)
class LeaseView:
    """One lease as the ledger holds it, for an oracle or an operator: its
    grant, its state, the usage billed to it, and (once settled) the
    provisional settlement loss late usage may still convert."""

    grant: LeaseGrant
    state: LeaseState
    usage: int
    loss: int


@dataclass(frozen=True, slots=True)
class Allocation:
    """A grant, and the ledger's remaining funding as of the transaction that
    made it (counting the new lease's units). ``funding`` is evidence about the
    account, kept apart from the capability; ``None``: nothing attested."""

    grant: LeaseGrant
    funding: BalanceShortfall | None


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Units a holder consumed under a lease, billed once per ``request_id``."""

    request_id: str
    lease_id: int
    account_id: int
    fencing_token: int
    units: int


@dataclass(frozen=True, slots=True)
class Conservation:
    """One account's funding statement.

    Left: everything the account was funded with -- money in (``deposited``)
    and credit extended (``overage_recorded``, unfunded usage billed under an
    elastic mode; it also lands in ``settled_usage``, so without it on the left
    the equation would fail by exactly the overage). Right: where the units
    sit -- unleased ``balance``, capacity out on lease (``active_lease_grants``,
    usage on active leases included), usage billed on settled leases,
    ``settlement_loss`` written off, and allowance ``expired`` with its period.
    ``deposited``, ``overage_recorded`` and ``expired`` only ever grow.
    """

    deposited: int
    overage_recorded: int
    balance: int
    active_lease_grants: int
    settled_usage: int
    settlement_loss: int
    expired: int

    def funded(self) -> int | None:
        """The left side, or ``None`` when it is not a ``CostUnits``."""
        return checked_sum((self.deposited, self.overage_recorded))

    def resting(self) -> int | None:
        """The right side, or ``None`` when it is not a ``CostUnits``."""
        return checked_sum((self.balance, self.active_lease_grants, self.settled_usage,
                            self.settlement_loss, self.expired))

    def holds(self) -> bool:
        """The equation, exactly. An unrepresentable side is a violation: this
        exists to detect corrupt state, so a total that wrapped into a match
        must not pass."""
        funded, resting = self.funded(), self.resting()
        return funded is not None and funded == resting

    def residual(self) -> int:
        """Funded minus resting, in unbounded ints: zero for a sound ledger, a
        series the lab can plot (``holds`` is the bounded verdict)."""
        return (self.deposited + self.overage_recorded - self.balance - self.active_lease_grants
                - self.settled_usage - self.settlement_loss - self.expired)


class GrantPolicyError(ValueError):
    """An invalid allocator policy, refused at construction: duration signs are
    part of the lease safety protocol, so they are never normalised."""


@dataclass(frozen=True, slots=True)
class GrantPolicy:
    """How grants shrink as an account's balance does.

    Deep balances grant the full request; near exhaustion a grant is capped at
    ``balance // shrink_divisor`` (floored at ``min_grant``, never above the
    balance), so N instances cannot strand a small balance behind one
    oversized lease. Only a consolidation funding a quote the holder already
    refused may pass the cap: that is demand, not hoarding.
    """

    shrink_divisor: int = 2
    min_grant: int = 1
    max_ttl_ms: int = 300_000
    """Hard cap on a lease's TTL; longer requests are clamped to it."""
    reclaim_grace_ms: int = 30_000
    """How long past ``expires_at`` the allocator waits before reclaiming.
    Holders stop spending at ``expires_at - margin``, so committed work has
    ``margin + grace`` to be billed; releases are accepted through the grace."""

    def validate(self) -> None:
        """``GrantPolicyError`` naming the first invalid field."""
        if self.shrink_divisor <= 0:
            raise GrantPolicyError("shrink_divisor must be positive")
        if self.min_grant <= 0:
            raise GrantPolicyError("min_grant must be positive")
        if self.max_ttl_ms <= 0:
            raise GrantPolicyError("max_ttl must be positive")
        if self.reclaim_grace_ms < 0:
            raise GrantPolicyError("reclaim_grace must not be negative")

    def reclaim_cutoff(self, now: int) -> int | None:
        """Greatest expiry whose whole grace has elapsed at ``now``; ``None``
        when that instant is not representable (no expiry is due)."""
        cutoff = now - self.reclaim_grace_ms
        return cutoff if cutoff >= TIMESTAMP_MIN else None

    def grant(self, requested: int, balance: int) -> int | None:
        """Units a request for ``requested`` receives from ``balance``, or
        ``None`` when no grant is possible. Fail-closed on a zero request and
        on an invalid policy, since this is a public pure helper too."""
        if requested <= 0 or balance <= 0 or self.shrink_divisor <= 0 or self.min_grant <= 0:
            return None
        cap = max(balance // self.shrink_divisor, self.min_grant)
        return max(min(requested, cap, balance), 1)

    def consolidation_grant(self, requested: int, balance: int, floor: int,
                            needed: int) -> int | None:
        """Units a consolidation re-grants, ``None`` exactly when ``grant`` refuses.

        ``balance`` already includes the restored credit and ``floor`` is that
        credit: the exchange never shrinks the holding. ``needed`` (the largest
        quote the returned lease refused) is proven demand, so the grant grows
        to it when ``balance`` can fund it, and changes nothing otherwise. A
        plain acquire is ``floor == needed == 0``, i.e. ``grant``."""
        sized = self.grant(requested, balance)
        if sized is None:
            return None
        sized = max(sized, min(floor, balance))
        return max(sized, needed) if needed <= balance else sized


@dataclass(frozen=True, slots=True)
class ReclaimedLease:
    """One lease settled by an expiry sweep. ``forfeited`` (``granted -
    recorded usage``) went to provisional settlement loss: a holder that never
    released cannot prove a unit unspent, and later usage converts it back."""

    lease_id: int
    account_id: int
    forfeited: int


def require_limit(limit: int) -> int:
    """A batch limit: a positive whole number (the seed's ``NonZeroUsize``)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ValueError(f"a batch limit must be a positive whole number, got {limit!r}")
    return limit


@dataclass(frozen=True, slots=True)
class ReclaimBatch:
    """What one bounded reclaim transaction settled. Build it with ``try_new``
    so ``saturated`` (run another batch at once) always agrees with the limit."""

    reclaimed: tuple[ReclaimedLease, ...]
    saturated: bool

    @classmethod
    def try_new(cls, reclaimed: Sequence[ReclaimedLease], limit: int) -> ReclaimBatch:
        """The batch, or ``StoreError`` when a backend returned more than the
        limit it was given -- corruption to refuse, not a batch to trust."""
        require_limit(limit)
        if len(reclaimed) > limit:
            raise StoreError(f"reclaim backend returned {len(reclaimed)} leases for a "
                             f"batch limit of {limit}")
        return cls(tuple(reclaimed), len(reclaimed) == limit)

    def __len__(self) -> int:
        return len(self.reclaimed)

    def is_empty(self) -> bool:
        return not self.reclaimed

    def is_saturated(self) -> bool:
        return self.saturated


@dataclass(frozen=True, slots=True)
class RolledAccount:
    """One account moved across a period boundary: the new allowance
    ``deposited`` and the closed period's unspent allowance ``expired``
    (manual top-ups never expire)."""

    account_id: int
    deposited: int
    expired: int


@dataclass(frozen=True, slots=True)
class RolloverBatch:
    """What one bounded rollover transaction crossed; ``try_new`` derives
    ``saturated`` from the limit, as ``ReclaimBatch.try_new`` does."""

    rolled: tuple[RolledAccount, ...]
    saturated: bool

    @classmethod
    def try_new(cls, rolled: Sequence[RolledAccount], limit: int) -> RolloverBatch:
        require_limit(limit)
        if len(rolled) > limit:
            raise StoreError(f"rollover backend returned {len(rolled)} accounts for a "
                             f"batch limit of {limit}")
        return cls(tuple(rolled), len(rolled) == limit)

    def __len__(self) -> int:
        return len(self.rolled)

    def is_empty(self) -> bool:
        return not self.rolled

    def is_saturated(self) -> bool:
        return self.saturated


@dataclass(frozen=True, slots=True)
class StatusChange:
    """What a status or class transition did. Without snapshot publication (out
    of scope here) both counts stay zero; the shape keeps the seed's answer."""

    republished: int = 0
    unreadable: int = 0


@dataclass(frozen=True, slots=True)
class Inspection:
    """What one inspection read saw, all of it from one consistent snapshot:
    the leases, funding statements and account views asked for, by id
    (``None`` for an id the ledger does not know)."""

    leases: dict[int, LeaseView | None]
    statements: dict[int, Conservation | None]
    accounts: dict[int, AccountView | None]


@dataclass(frozen=True, slots=True)
class AccountView:
    """One account's administrative state from one consistent read, so status,
    schedule and the funding terms never straddle a rollover or a suspension.
    ``period_start`` is the start of the period whose allowance was last
    deposited; ``None`` until a schedule's first rollover."""

    account_id: int
    status: AccountStatus
    capacity_class: CapacityClass
    schedule: BudgetSchedule | None
    period_start: int | None
    conservation: Conservation


@dataclass(frozen=True, slots=True)
class IngestReport:
    """How one ingest batch was partitioned: newly ``accepted``, ``duplicate``
    replays of a recorded ``request_id``, and ``rejected`` events (unknown
    lease, capability mismatch, no capacity left, units outside the ledger's
    domain) -- bounded billing loss that reconciliation sees. ``unattributed``
    (key attribution) is ``None``: this sink does not report it."""

    accepted: int = 0
    duplicate: int = 0
    rejected: int = 0
    unattributed: int | None = None

    def validate(self, submitted: int) -> None:
        """``StoreError`` unless the report partitions ``submitted`` events
        exactly once; check before releasing queued evidence."""
        total = checked_sum((self.accepted, self.duplicate, self.rejected))
        if total != submitted or (self.unattributed is not None
                                  and not 0 <= self.unattributed <= self.accepted):
            raise StoreError("invalid usage acknowledgement cardinality")
