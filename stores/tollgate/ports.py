"""The three traits a tollgate ledger implements (seed 003), as ``Protocol``s,
and ``LedgerInspection``, the lab's read-only view of a ledger for its oracle.

A ledger class subclasses the protocols it implements, which is how it
inherits ``LeaseAllocator.reclaim_expired``: the full drain built on
``reclaim_expired_batch``. The drain is also the free function
``drain_reclaim_expired`` so a wrapper overriding ``reclaim_expired`` (a fault
injector, a variant) reuses the one loop and still re-dispatches every batch
through its own ``reclaim_expired_batch``, instead of copying the loop.

Errors: allocator calls raise ``AllocateError`` subclasses (a storage failure
wrapped as ``AllocateStorage``); batch reclaim and rollover raise
``StoreError``; ingest raises ``IngestError``; admin calls raise their own
families. Instants and durations are ``int`` ms passed by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from stores.tollgate.domain import (
    DEFAULT_RECLAIM_BATCH_LIMIT,
    AccountConfig,
    AccountStatus,
    AccountView,
    Allocation,
    BudgetSchedule,
    CapacityClass,
    Conservation,
    IngestReport,
    Inspection,
    LeaseView,
    ReclaimBatch,
    ReclaimedLease,
    RolloverBatch,
    StatusChange,
    UsageEvent,
)
from stores.tollgate.errors import StoreError


class LeaseAllocator(Protocol):
    """Atomic lease allocation against an account's balance: one ``acquire``
    funds thousands of local reservations."""

    async def acquire(self, account: int, requested: int, ttl_ms: int,
                      now: int) -> Allocation:
        """Debit a grant sized by the ledger's ``GrantPolicy`` (possibly smaller
        than ``requested``; the TTL clamped to ``max_ttl``), with a fencing
        token from a strictly increasing per-account sequence. The token is a
        capability for this lease only: a newer one invalidates no other."""
        ...

    async def release(self, lease_id: int, fencing_token: int, unspent: int,
                      now: int) -> None:
        """Require the stored ``(lease_id, fencing_token)``, credit ``unspent``
        and close the lease; ``granted - usage - unspent`` becomes provisional
        settlement loss, which later usage may convert into billed usage.
        Accepted through the reclaim grace."""
        ...

    async def consolidate(self, lease_id: int, fencing_token: int, unspent: int,
                          requested: int, needed: int, ttl_ms: int, now: int) -> Allocation:
        """``release`` then ``acquire`` for the lease's account in one
        transaction, sized by ``GrantPolicy.consolidation_grant``: never smaller
        than the credit actually restored, grown to ``needed`` when fundable.

        Both halves or neither: a balance, account or TTL refusal (and
        ``InvalidRelease``) leaves the old lease unchanged. ``UnknownLease``,
        ``Fenced`` and ``LeaseNotActive`` give no authority to keep spending
        the old lease. A storage failure is ambiguous: the holder keeps the old
        lease out of service and releases it; the lost replacement is bounded
        by TTL reclaim. A holder cannot compose this from two calls -- the
        policy re-sizes against a balance the returned units already rejoined,
        and another instance can take them in between."""
        ...

    async def reclaim_expired_batch(self, now: int, limit: int) -> ReclaimBatch:
        """Settle at most ``limit`` active leases past ``expires_at + grace``
        in one transaction; nothing is credited back (see ``ReclaimedLease``)."""
        ...

    async def reclaim_expired(self, now: int) -> list[ReclaimedLease]:
        """Settle every expired lease through bounded transactions."""
        return await drain_reclaim_expired(self, now)


async def drain_reclaim_expired(allocator: LeaseAllocator, now: int,
                                limit: int = DEFAULT_RECLAIM_BATCH_LIMIT) -> list[ReclaimedLease]:
    """Run saturated reclaim batches until a partial one.

    Earlier batches stay committed when a later one fails, so that failure is
    re-raised as a ``StoreError`` reporting the partial progress rather than as
    if the drain were all-or-nothing; a first-batch failure is raised as is."""
    reclaimed: list[ReclaimedLease] = []
    while True:
        try:
            batch = await allocator.reclaim_expired_batch(now, limit)
        except StoreError as error:
            if not reclaimed:
                raise
            units = sum(lease.forfeited for lease in reclaimed)
            raise StoreError(f"reclaim drain failed after {len(reclaimed)} leases forfeiting "
                             f"{units} units were committed: {error}") from error
        reclaimed.extend(batch.reclaimed)
        if not batch.is_saturated():
            return reclaimed


class UsageSink(Protocol):
    """The billing ledger's write side."""

    async def ingest(self, events: Sequence[UsageEvent], now: int) -> IngestReport:
        """Record a batch, idempotent on ``request_id`` (duplicates classified
        before their payload is read). Each new event must match its lease's
        stored ``(lease_id, account_id, fencing_token)`` before lease state and
        capacity are checked; units outside the ledger's domain are rejected
        one by one. Partial acceptance is normal. A batch that would overflow
        an accumulated total is refused whole (``IngestRefused``)."""
        ...


class AdminStore(Protocol):
    """Control-plane writes and the operator read."""

    async def create_account(self, config: AccountConfig) -> None:
        """``AccountAlreadyExists`` rather than an overwrite or a silent no-op."""
        ...

    async def deposit(self, account: int, units: int) -> None:
        """A top-up: it never expires with a budget period."""
        ...

    async def set_account_status(self, account: int, status: AccountStatus) -> StatusChange:
        """``CLOSED`` is terminal (``CLOSED -> CLOSED`` a no-op). Outstanding
        leases are not reclaimed; acquisition refuses at once."""
        ...

    async def set_capacity_class(self, account: int,
                                 capacity_class: CapacityClass) -> StatusChange:
        """Refused on a closed account; funding is untouched."""
        ...

    async def set_budget_schedule(self, account: int,
                                  schedule: BudgetSchedule | None) -> None:
        """Set or clear the periodic allowance. Deposits nothing: the first
        allowance arrives with the next rollover. Clearing leaves the balance
        alone, unspent allowance included, which simply stops expiring."""
        ...

    async def roll_due_periods(self, now: int, limit: int) -> RolloverBatch:
        """Cross the boundary for up to ``limit`` due accounts: expire the
        closed period's unspent allowance, deposit the next. Idempotent per
        boundary, never more than one allowance per pass however many periods
        were missed; unscheduled accounts are never selected."""
        ...

    async def account_view(self, account: int) -> AccountView | None:
        """One account's state from one consistent read; ``None`` if unknown."""
        ...


class LedgerInspection(Protocol):
    """What an oracle or an operator reads of a ledger beyond the seed's traits.

    Each read is one consistent snapshot of what it returns; none changes
    anything. A storage failure raises ``StoreError``."""

    async def conservation(self, account: int) -> Conservation | None:
        """The account's funding equation now; ``None`` if unknown."""
        ...

    async def account_ids(self) -> tuple[int, ...]:
        """Every account, ascending."""
        ...

    async def lease_views(self) -> tuple[LeaseView, ...]:
        """Every lease ever granted, settled ones included, ascending lease id."""
        ...

    async def lease_view(self, lease_id: int) -> LeaseView | None:
        """The lease as held now; ``None`` if no such lease was ever granted."""
        ...

    async def inspect(self, leases: Sequence[int] = (), statements: Sequence[int] = (),
                      accounts: Sequence[int] = ()) -> Inspection:
        """``lease_view`` of each of ``leases``, ``conservation`` of each of
        ``statements`` and ``account_view`` of each of ``accounts``, in one
        read: one snapshot, one round trip where the ledger has a server."""
        ...
