"""A holder: one gateway instance funding its local spends from leases.

A holder keeps at most one lease per account in service and charges spends to
it locally; the ledger hears of them only as usage events, billed in batches
by a background loop that also releases the leases the holder stopped
spending and runs the ledger's expiry sweep (and, when the accounts have a
budget schedule, its rollover pass: every replica runs it, as every
control-plane replica does, seed 003 L1142-L1147). This is the seed's holder side
of the ledger contract (seed 003's ``LeaseAllocator`` documentation):

* it stops spending a lease ``spend_margin`` before its expiry, then releases
  what it did not spend, so its last usage is billed before a reclaim;
* when the lease in service cannot fund a spend, it exchanges it in ONE
  ``consolidate`` (``needed`` = the spend it could not fund), never a release
  followed by an acquire -- the variants show what that costs;
* a consolidation refused for balance, account or TTL leaves the old lease in
  service; ``UnknownLease``/``Fenced``/``LeaseNotActive`` give no authority to
  spend it further; an ambiguous one (a storage failure) takes the old lease
  out of service and releases it, its lost replacement being bounded by the
  TTL reclaim;
* usage is re-sent unchanged (same ``request_id``) until the ledger answers,
  so a batch whose reply was lost is never billed twice by a sound ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stores.ports import Runtime
from stores.tollgate.client import LedgerClient
from stores.tollgate.domain import Allocation, LeaseGrant, UsageEvent
from stores.tollgate.errors import (
    AllocateError,
    AllocateStorage,
    Fenced,
    IngestRefused,
    IngestUnavailable,
    LeaseNotActive,
    StoreError,
    UnknownLease,
)
from stores.tollgate.settings import TollgateSettings

LOST_AUTHORITY = (UnknownLease, Fenced, LeaseNotActive)
"""Refusals that say the holder's lease is no longer its to spend."""

POLL_MS = 1
"""How often a spend looks again at an allocation in flight for its account."""
BUSY = "busy"
"""A spend's refusal when another spend of the holder for the account was
allocating all along ``allocation_wait``."""


@dataclass
class HeldLease:
    """A lease in a holder's hands and what it charged to it so far."""

    grant: LeaseGrant
    spent: int = 0
    release_attempts: int = 0

    @property
    def unspent(self) -> int:
        return self.grant.granted - self.spent


@dataclass(frozen=True)
class Spend:
    """What one spend came to: the lease it was charged to (``None``: refused,
    ``refusal`` says why), and the grant it obtained on the way, if any, with
    the credit the exchange that made it returned (0 for an acquire)."""

    lease: LeaseGrant | None
    refusal: str = ""
    obtained: LeaseGrant | None = None
    restored: int = 0


@dataclass
class LeaseHolder:
    """One gateway instance's leases, pending usage and background loop."""

    client: LedgerClient
    runtime: Runtime
    settings: TollgateSettings
    leases: dict[int, HeldLease] = field(default_factory=dict)
    retiring: list[HeldLease] = field(default_factory=list)
    """Leases out of service, to release (unspent credited back)."""
    pending: list[UsageEvent] = field(default_factory=list)
    allocating: set[int] = field(default_factory=set)

    # -- spending ------------------------------------------------------------

    async def spend(self, account: int, units: int, request_id: str) -> Spend:
        """Charge ``units`` to ``account``'s lease, allocating one if need be."""
        waited = 0
        while account in self.allocating:
            if waited >= self.settings.allocation_wait_ms:
                return Spend(None, BUSY)
            await self.runtime.sleep_ms(POLL_MS)
            waited += POLL_MS
        lease = self.leases.get(account)
        if lease is not None and not self._spendable(lease):
            self._retire(account)
            lease = None
        if lease is not None and lease.unspent >= units:
            return self._charge(lease, units, request_id)
        self.allocating.add(account)
        try:
            if lease is None:
                allocation = await self._acquire(account, units)
                restored = 0
            else:
                allocation = await self._exchange(account, lease, units)
                restored = lease.unspent
        except AllocateError as refusal:
            return Spend(None, refusal.name)
        finally:
            self.allocating.discard(account)
        if allocation is None:
            return await self.spend(account, units, request_id)  # lost authority: start anew
        held = HeldLease(allocation.grant)
        self.leases[account] = held
        if held.unspent < units:
            return Spend(None, "grant_too_small", allocation.grant, restored)
        spent = self._charge(held, units, request_id)
        return Spend(spent.lease, "", allocation.grant, restored)

    def _spendable(self, lease: HeldLease) -> bool:
        return self.runtime.now_ms() < lease.grant.expires_at - self.settings.spend_margin_ms

    def _charge(self, lease: HeldLease, units: int, request_id: str) -> Spend:
        lease.spent += units
        grant = lease.grant
        self.pending.append(UsageEvent(request_id, grant.lease_id, grant.account_id,
                                       grant.fencing_token, units))
        return Spend(grant)

    async def _acquire(self, account: int, units: int) -> Allocation:
        return await self.client.acquire(account, max(self.settings.lease_units, units),
                                         self.settings.lease_ttl_ms)

    async def _exchange(self, account: int, lease: HeldLease, units: int) -> Allocation | None:
        """Consolidate ``lease`` into a lease that can fund ``units``; ``None`` when
        the ledger says the lease is no longer the holder's (start anew)."""
        grant = lease.grant
        try:
            return await self.client.consolidate(
                grant.lease_id, grant.fencing_token, lease.unspent,
                max(self.settings.lease_units, units), units, self.settings.lease_ttl_ms)
        except LOST_AUTHORITY:
            self._forget(account, lease)
            return None
        except AllocateStorage:
            self._retire(account, lease)  # ambiguous: keep it out of service and release it
            raise

    def _retire(self, account: int, lease: HeldLease | None = None) -> None:
        """Take ``account``'s lease in service (``lease``, when given) out of
        service, to be released: once. While a consolidation was in flight the
        background loop may have retired that very lease (it ran past its
        spending time): it is not retired again, nor a newer lease in its place."""
        held = self._forget(account, lease)
        if held is not None and held not in self.retiring:
            self.retiring.append(held)

    def _forget(self, account: int, lease: HeldLease | None = None) -> HeldLease | None:
        """Take ``account``'s lease (``lease``, when given) out of service
        without releasing it; ``None`` when it is no longer in service."""
        held = self.leases.get(account)
        if held is None or (lease is not None and held is not lease):
            return None
        return self.leases.pop(account)

    # -- the background loop ----------------------------------------------------

    async def run_background(self) -> None:
        """Bill usage and release retired leases every ``flush_every``; sweep
        expired leases every ``reclaim_every``; with a budget schedule, run the
        rollover pass every ``rollover_every``. Runs as long as the holder."""
        settings = self.settings
        next_sweep = self.runtime.now_ms() + settings.reclaim_every_ms
        rolling = settings.budget_allowance is not None
        next_roll = self.runtime.now_ms() + settings.rollover_every_ms
        while True:
            await self.runtime.sleep_ms(settings.flush_every_ms)
            await self.flush()
            for account in [account for account, lease in self.leases.items()
                            if not self._spendable(lease)]:
                self._retire(account)
            await self.release_retired()
            if self.runtime.now_ms() >= next_sweep:
                next_sweep += settings.reclaim_every_ms
                await self.sweep()
            if rolling and self.runtime.now_ms() >= next_roll:
                next_roll += settings.rollover_every_ms
                await self.roll()

    async def flush(self) -> None:
        """Send pending usage in batches until the ledger stops answering."""
        while self.pending:
            batch = self.pending[:self.settings.ingest_batch]
            try:
                report = await self.client.ingest(batch)
                report.validate(len(batch))
            except IngestUnavailable:
                return  # re-sent unchanged next time: idempotent on request_id
            except IngestRefused:
                pass  # refused whole, and would be again: dropped, billing loss
            except StoreError:
                return
            del self.pending[:len(batch)]

    async def release_retired(self) -> None:
        """Release every retired lease, crediting what it did not spend."""
        for lease in list(self.retiring):
            grant = lease.grant
            try:
                await self.client.release(grant.lease_id, grant.fencing_token, lease.unspent)
            except AllocateStorage:
                lease.release_attempts += 1
                if lease.release_attempts < self.settings.release_attempts:
                    continue  # tried again next time; past the cap, the reclaim settles it
            except AllocateError:
                pass  # no longer the holder's to release
            self.retiring.remove(lease)

    async def sweep(self) -> None:
        """The ledger's expiry drain, one bounded transaction at a time."""
        while True:
            try:
                batch = await self.client.reclaim_expired_batch(self.settings.reclaim_batch)
            except StoreError:
                return
            if not batch.is_saturated():
                return

    async def roll(self) -> None:
        """The ledger's rollover drain: one bounded transaction at a time, each
        checking and crossing the boundary of the accounts it selects under
        their locks, so a second pass racing it skips them (seed 003
        L1142-L1147). A pass that failed in transit is simply run again next
        time: it deposits nothing twice."""
        while True:
            try:
                batch = await self.client.roll_due_periods(self.settings.rollover_batch)
            except StoreError:
                return
            if not batch.is_saturated():
                return
