"""Mutant (ledger): the expiry sweep writes a lease's whole grant off as
settlement loss, the usage already billed to it included.

The bug is on the reclaim path, which only a fault takes (a sound holder
releases its leases before they expire): a holder crashes, its leases are
reclaimed, and the units its spends were billed for are counted as lost as
well as used (moved from settled usage to loss, so the equation still
balances and only the loss is wrong). The seed: each reclaimed lease's
``granted - recorded usage`` is its provisional loss
(003_fa119f058ec0ffc5.txt:566-574, 376-383)."""

from __future__ import annotations

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.domain import ReclaimBatch
from stores.tollgate.variants import LedgerWrapper

MUTANT = LedgerMutant(
    name="reclaim_counts_billed_usage_as_loss",
    breaks="the expiry sweep records a lease's billed usage as settlement loss too",
    seed=("003_fa119f058ec0ffc5.txt:566-574", "003_fa119f058ec0ffc5.txt:376-383"),
    exposed_by={"faults": {"schedule": [{"at": "4s", "fault": "crash", "replica": 1,
                                         "restart_after": "1s"}]}},
    damage=("settlement_loss_excess_units",),
    fault="crash",
)


class CountsBilledUsageAsLoss(LedgerWrapper):
    async def reclaim_expired_batch(self, now: int, limit: int) -> ReclaimBatch:
        batch = await self.ledger.reclaim_expired_batch(now, limit)
        books = self.ledger._books
        for reclaimed in batch.reclaimed:
            lease = books.leases[reclaimed.lease_id]
            account = books.accounts[lease.grant.account_id]
            lease.loss += lease.usage  # the bug: billed units written off as well
            account.settlement_loss += lease.usage
            account.settled_usage -= lease.usage
        return batch


KIND = register_ledger_mutant(MUTANT, wrapper=CountsBilledUsageAsLoss)
