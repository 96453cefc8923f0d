"""Mutant (holder): a usage batch the ledger did not answer is dropped as if
it had been billed.

The bug is on the flush's retry path: after ``IngestUnavailable`` (a lost
request or reply, a timeout) the holder takes the batch off its queue
instead of re-sending it unchanged. When the request was lost the ledger
never saw the batch, and its usage is never billed while the holder's later
batches arrive. The seed: an unreachable sink is a duration, "retrying the
same batch is the designed behaviour, and giving up would lose billable
events over a blip" (003_fa119f058ec0ffc5.txt:1339-1349)."""

from __future__ import annotations

from mutants.tollgate import LedgerMutant, register_ledger_mutant
from stores.tollgate.errors import IngestRefused, IngestUnavailable, StoreError
from stores.tollgate.holder import LeaseHolder

MUTANT = LedgerMutant(
    name="flush_drops_unanswered_batch",
    breaks="the holder drops a usage batch the ledger did not answer instead of re-sending it",
    seed=("003_fa119f058ec0ffc5.txt:1339-1349",),
    exposed_by={"faults": {"schedule": [{"at": "1s", "fault": "lose_request", "replica": 0,
                                         "call": "ingest", "count": 2}]}},
    damage=("billing_loss_units",),
    fault="request_lost",
)


class DropsUnansweredBatch(LeaseHolder):
    async def flush(self) -> None:
        while self.pending:
            batch = self.pending[:self.settings.ingest_batch]
            try:
                report = await self.client.ingest(batch)
                report.validate(len(batch))
            except (IngestUnavailable, IngestRefused):
                pass  # the bug: taken as billed, never sent again
            except StoreError:
                return
            del self.pending[:len(batch)]


KIND = register_ledger_mutant(MUTANT, holder_class=DropsUnansweredBatch)
