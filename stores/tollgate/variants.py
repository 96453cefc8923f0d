"""Historical variants of the tollgate ledger and its holder: what the seed's
comments say the fixed ones must not do, each changing one thing.

Holder-side variants subclass ``LeaseHolder``; ledger-side ones wrap the
ledger the service node runs (``MemoryLedger`` or ``PostgresLedger`` alike),
size its grants with a ``GrantPolicy`` subclass (``with_policy``), or run
its calls by a ``MemoryLedger`` subclass changing one rule (``rules``;
``PostgresLedger`` runs the same rules over the rows it loaded), so every
variant runs on both backends. One seam takes both sides: the rollover split
into a read and a roll (``ReadsThenRolls`` sends them, ``RollsWhatItRead``
answers them). The lab runs a variant and the fixed
kind on the same scenario and seed to show what the rule is worth
(``data/scenarios/tollgate-variant-*.toml``), with a race report in
``data/races/`` that ``hunt`` found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from stores.registry import StoreKind
from stores.tollgate.client import IN_TRANSIT
from stores.tollgate.domain import (
    Allocation,
    Conservation,
    GrantPolicy,
    IngestReport,
    RolloverBatch,
    UsageEvent,
    require_limit,
)
from stores.tollgate.errors import AllocateStorage, LeaseNotActive, StoreError
from stores.tollgate.holder import LOST_AUTHORITY, HeldLease, LeaseHolder
from stores.tollgate.kinds import ledger_kind
from stores.tollgate.memory import AccountRecord, LeaseRecord, MemoryLedger
from stores.tollgate.service import LedgerService, open_ledger
from stores.tollgate.settings import TollgateSettings


class ComposingHolder(LeaseHolder):
    """The bug: a holder that exchanges a low lease by ``release`` then
    ``acquire``, two transactions. The acquire is sized against a balance the
    released units already rejoined (near exhaustion the shrink cap halves
    it), and another instance may take them in between: the holder gets back
    less than it gave. The fix: one ``consolidate``, never smaller than the
    credit it restores."""

    async def _exchange(self, account: int, lease: HeldLease, units: int) -> Allocation | None:
        grant = lease.grant
        try:
            await self.client.release(grant.lease_id, grant.fencing_token, lease.unspent)
        except LOST_AUTHORITY:
            del self.leases[account]
            return None
        except AllocateStorage:
            self._retire(account)
            raise
        del self.leases[account]
        return await self._acquire(account, units)


class SpendsThroughAmbiguity(LeaseHolder):
    """The bug: a consolidation whose outcome is unknown (a storage failure)
    leaves the old lease in service. If it committed, the old lease is
    closed with its unspent credited back, yet the holder keeps charging
    spends to it: usage past the lease's provisional loss is refused, and the
    replacement lies stranded. The fix: take the old lease out of service and
    release it."""

    async def _exchange(self, account: int, lease: HeldLease, units: int) -> Allocation | None:
        try:
            return await super()._exchange(account, lease, units)
        except AllocateStorage:
            # The background loop may have released the lease while the call
            # waited (past its spending time): then there is nothing to undo.
            if lease in self.retiring:
                self.retiring.remove(lease)
                self.leases[account] = lease  # back in service, as if nothing happened
            raise


class LedgerWrapper:
    """A ledger with one call changed; every other call (and the inspection
    reads the lab makes) goes to the wrapped ledger."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)


class ReplayBillsTwice(LedgerWrapper):
    """The bug: ingest keyed on nothing. A batch re-sent after its reply was
    lost (or by a driver retry) is billed again, every event of it. The fix:
    idempotence on ``request_id``, duplicates classified before anything."""

    def __init__(self, ledger: Any) -> None:
        super().__init__(ledger)
        self.deliveries = 0

    async def ingest(self, events: Sequence[UsageEvent], now: int) -> IngestReport:
        self.deliveries += 1
        fresh = [dataclasses.replace(event, request_id=f"{event.request_id}#{self.deliveries}")
                 for event in events]
        return await self.ledger.ingest(fresh, now)


class SettledReleaseSucceeds(LedgerWrapper):
    """The bug: a release made "idempotent" by answering success for a lease
    that is no longer active. A stale holder -- its lease reclaimed while it
    was paused -- is told its units went back when they were forfeited, and
    nothing tells it its capability was gone. The fix: ``LeaseNotActive``."""

    async def release(self, lease_id: int, fencing_token: int, unspent: int,
                      now: int) -> None:
        try:
            await self.ledger.release(lease_id, fencing_token, unspent, now)
        except LeaseNotActive:
            return None


def wrapped(wrapper: type[LedgerWrapper]):
    """A ``StoreKind.service`` opening the fixed ledger inside ``wrapper``."""

    async def open_service(url: str | None, settings: TollgateSettings, keys: list[Any],
                           name: str) -> LedgerService:
        ledger = await open_ledger(url, settings, keys, name)
        return LedgerService(wrapper(ledger), dropped_on_close=url is not None)

    return open_service


async def _open_without_grace(url: str | None, settings: TollgateSettings, keys: list[Any],
                              name: str) -> LedgerService:
    # The bug: the sweep reclaims a lease the moment it expires. A holder's
    # release landing just after expiry -- a pause, a slow network -- is
    # refused, and its unspent units are forfeited as settlement loss. The
    # fix: a grace past expiry through which releases are still accepted.
    ledger = await open_ledger(url, settings.model_copy(update={"reclaim_grace_ms": 0}), keys,
                               name)
    return LedgerService(ledger, dropped_on_close=url is not None)


class ShrinksTheHolding(GrantPolicy):
    """The bug (GL-109): a consolidation re-granted with no floor. Its size is
    the ordinary policy answer against the restored balance (grown to the
    refused quote when that balance can fund it), so near exhaustion, for a
    spend the balance cannot fund, the shrink cap halves the grant below the
    unspent units the holder gave back. The fix: the re-grant is never
    smaller than the credit the exchange restored."""

    __slots__ = ()

    def consolidation_grant(self, requested: int, balance: int, floor: int,
                            needed: int) -> int | None:
        return super().consolidation_grant(requested, balance, 0, needed)


class IgnoresRefusedQuote(GrantPolicy):
    """The bug (GL-131): a consolidation re-granted no larger than the ordinary
    policy answer and its floor, whatever quote the holder already failed to
    fund. Under a shrink divisor of two a holder can never reach a quote above
    half the restored balance: a 60-unit balance re-grants 30, again and
    again, however often a spend of 51 was refused. The fix: the grant grows
    to the refused quote when the restored balance can fund it."""

    __slots__ = ()

    def consolidation_grant(self, requested: int, balance: int, floor: int,
                            needed: int) -> int | None:
        return super().consolidation_grant(requested, balance, floor, 0)


def with_policy(policy_class: type[GrantPolicy]):
    """A ``StoreKind.service`` opening the fixed ledger with its grant policy
    (the scenario's settings) sized by ``policy_class`` instead."""

    async def open_service(url: str | None, settings: TollgateSettings, keys: list[Any],
                           name: str) -> LedgerService:
        ledger = await open_ledger(url, settings, keys, name)
        ledger.policy = policy_class(**{field.name: getattr(ledger.policy, field.name)
                                        for field in dataclasses.fields(ledger.policy)})
        return LedgerService(ledger, dropped_on_close=url is not None)

    return open_service


class ReclaimCreditsBack(MemoryLedger):
    """The bug (GL-136): the expiry sweep settles a lease as if its holder had
    released every unit it has not billed, crediting them back to the balance.
    A holder that never released proves nothing unspent: one paused (or cut
    off) through the expiry and the grace may still hold work it committed and
    did not flush. Those units are leased again, and its late usage finds no
    provisional loss to land in: refused, billed nowhere. The fix: a reclaim
    credits nothing and records ``granted - usage`` as provisional loss."""

    @staticmethod
    def _reclaim_unspent(lease: LeaseRecord) -> int:
        return lease.unbilled()


class StatementWithoutExpiry(MemoryLedger):
    """The bug (GL-97, seed 003 L204-L216): a funding statement with no
    ``expired`` term. A rollover takes the closed period's unspent allowance
    out of the balance, as it must, and the statement has nowhere to put it:
    the equation fails by exactly the units that expired, and the ledger
    reports corruption every time a budget does what it exists to do. The
    fix: ``expired`` on the right, beside ``settlement_loss``."""

    @staticmethod
    def _conservation(state: AccountRecord) -> Conservation:
        return dataclasses.replace(MemoryLedger._conservation(state), expired=0)


class RollsWhatItRead(MemoryLedger):
    """The ledger half of the historical rollover (seed 003 L1142-L1147): the
    pass asks which accounts are past a boundary in one transaction
    (``due_periods``), then rolls those in another (``roll_periods``), which
    crosses the boundary of every account it is given without checking it
    again under the account's lock. The fixed ``roll_due_periods`` checks and
    crosses in one transaction; these rules keep it, unused."""

    async def due_periods(self, now: int, limit: int) -> tuple[int, ...]:
        require_limit(limit)
        return tuple(account for account, state in sorted(self._books.accounts.items())
                     if self._due(state, now))[:limit]

    async def roll_periods(self, accounts: Sequence[int], now: int) -> RolloverBatch:
        states = [state for account in sorted(set(accounts))
                  if (state := self._books.accounts.get(account)) is not None
                  and state.schedule is not None]
        for state in states:
            self._check_roll(state, now)
        rolled = [self._roll(state, now) for state in states]
        return RolloverBatch.try_new(rolled, max(len(rolled), 1))


class ReadsThenRolls(LeaseHolder):
    """The caller half: a rollover pass that reads each period first and then
    rolls what it read, two transactions. Every holder runs the pass; two
    that read before either rolls both roll the same accounts, and each
    deposits the period's allowance (the second expiring what is left of the
    first as if its period had closed). A pass that fails in transit is not
    re-run: the next one reads again. The fix: one ``roll_due_periods``,
    which checks and crosses under the row lock, so the second caller skips
    the account."""

    async def roll(self) -> None:
        limit = self.settings.rollover_batch
        while True:
            try:
                due = await self._call("due_periods", limit)
                if due:
                    await self._call("roll_periods", due)
            except StoreError:
                return
            if len(due) < limit:
                return

    async def _call(self, verb: str, *args: Any) -> Any:
        try:
            return await self.client._call(verb, *args)
        except IN_TRANSIT as error:
            raise StoreError(f"{verb}: {error}") from error


KINDS: tuple[StoreKind, ...] = (
    ledger_kind("tollgate.variants.release_then_acquire",
                "historical: the holder exchanges a low lease by release then acquire "
                "(re-granted less than it gave back)", holder_class=ComposingHolder),
    ledger_kind("tollgate.variants.spends_through_ambiguity",
                "historical: an ambiguous consolidation leaves the old lease in service "
                "(usage refused past its loss, replacement stranded)",
                holder_class=SpendsThroughAmbiguity),
    ledger_kind("tollgate.variants.replay_bills_twice",
                "historical: ingest not idempotent on request_id (a re-sent batch is "
                "billed twice)", service=wrapped(ReplayBillsTwice)),
    ledger_kind("tollgate.variants.reclaim_without_grace",
                "historical: expired leases reclaimed at once (a late release is refused, "
                "its units forfeited)", service=_open_without_grace),
    ledger_kind("tollgate.variants.settled_release_succeeds",
                "historical: releasing a settled lease answers success (a stale holder "
                "is never told)", service=wrapped(SettledReleaseSucceeds)),
    ledger_kind("tollgate.variants.consolidation_shrinks_holding",
                "historical: a consolidation re-granted with no floor (near exhaustion "
                "the holder gets back less than it gave)",
                service=with_policy(ShrinksTheHolding)),
    ledger_kind("tollgate.variants.reclaim_credits_back",
                "historical: the expiry sweep credits a lease's unbilled units back (a "
                "late holder's usage is refused, billed nowhere)",
                rules=ReclaimCreditsBack),
    ledger_kind("tollgate.variants.consolidation_ignores_demand",
                "historical: a consolidation never grows to the quote the holder could not "
                "fund (a spend the balance can fund is refused, again and again)",
                service=with_policy(IgnoresRefusedQuote)),
    ledger_kind("tollgate.variants.rollover_deposits_twice",
                "historical: the rollover pass reads which periods are due, then rolls them "
                "in another transaction (two passes racing a boundary deposit its allowance "
                "twice)", holder_class=ReadsThenRolls, rules=RollsWhatItRead),
    ledger_kind("tollgate.variants.statement_without_expiry",
                "historical: the funding statement has no expired term (every rollover that "
                "expires allowance breaks the equation by what expired)",
                rules=StatementWithoutExpiry),
)
