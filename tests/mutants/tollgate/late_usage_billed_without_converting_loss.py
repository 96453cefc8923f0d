"""Mutant (ledger): usage for a reclaimed lease is billed, and its
provisional loss is left as it was.

The bug is on the reclaim's recovery path: late usage (a holder paused past
its grace) is recorded as settled usage, but the loss the sweep wrote for the
same units is not reduced, so the account's units rest in two places at
once and the equation fails. The seed: late usage "converts" loss into
billed usage (003_fa119f058ec0ffc5.txt:566-574), and the equation holds
exactly after every transaction (003_fa119f058ec0ffc5.txt:219-232)."""

from __future__ import annotations

from collections.abc import Sequence

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from mutants.tollgate.late_usage_refused_after_reclaim import PAUSED_PAST_GRACE
from stores.tollgate.domain import IngestReport, LeaseState, UsageEvent
from stores.tollgate.variants import LedgerWrapper

MUTANT = LedgerMutant(
    name="late_usage_billed_without_converting_loss",
    breaks="late usage for a reclaimed lease is billed without reducing its loss",
    seed=("003_fa119f058ec0ffc5.txt:566-574", "003_fa119f058ec0ffc5.txt:219-232"),
    exposed_by=PAUSED_PAST_GRACE,
    damage=("conservation_violations", "conservation_residual_max_units"),
    fault="pause",
)


class KeepsTheLoss(LedgerWrapper):
    async def ingest(self, events: Sequence[UsageEvent], now: int) -> IngestReport:
        books = self.ledger._books
        reclaimed = {lease_id: lease.loss for lease_id, lease in books.leases.items()
                     if lease.state is LeaseState.RECLAIMED}
        report = await self.ledger.ingest(events, now)
        for lease_id, loss in reclaimed.items():
            lease = books.leases[lease_id]
            converted = loss - lease.loss
            if converted:  # the bug: the loss put back as it was
                lease.loss = loss
                books.accounts[lease.grant.account_id].settlement_loss += converted
        return report


KIND = register_ledger_mutant(MUTANT, wrapper=KeepsTheLoss)
