"""Mutant (ledger): a usage batch holding any event already recorded is taken
for a replay and answered as duplicates whole.

The bug is on the ingest's replay path: a holder re-sends a batch whose reply
was lost, and by then more usage has joined its queue, so the batch it sends
holds old events and new ones. The mutant bills none of the new ones. The
seed: duplicates are classified one by one, "partial acceptance is normal"
(003_fa119f058ec0ffc5.txt:1239-1246, 1199-1202)."""

from __future__ import annotations

from collections.abc import Sequence

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.domain import IngestReport, UsageEvent
from stores.tollgate.variants import LedgerWrapper

MUTANT = LedgerMutant(
    name="ingest_skips_batch_with_a_duplicate",
    breaks="ingest answers a batch holding any recorded event as duplicates whole",
    seed=("003_fa119f058ec0ffc5.txt:1239-1246", "003_fa119f058ec0ffc5.txt:1199-1202"),
    exposed_by={"faults": {"schedule": [{"at": "1s", "fault": "lose_reply", "replica": 0,
                                         "call": "ingest", "count": 1}]}},
    damage=("billing_loss_units",),
    fault="reply_lost",
)


class SkipsBatchWithADuplicate(LedgerWrapper):
    async def ingest(self, events: Sequence[UsageEvent], now: int) -> IngestReport:
        recorded = self.ledger._books.requests
        if any(event.request_id in recorded for event in events):
            return IngestReport(accepted=0, duplicate=len(events), rejected=0)
        return await self.ledger.ingest(events, now)


KIND = register_ledger_mutant(MUTANT, wrapper=SkipsBatchWithADuplicate)
